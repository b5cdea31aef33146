package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// GangName is the gang plugin's name in KubeSchedulerConfiguration
// profiles. A profile that enables it must enable GPUTopology too.
const GangName = "GPUTopologyGang"

// ErrNoDeviceState is wrapped by the errors of a GPUTopologyGang plugin
// whose profile does not enable GPUTopology: the gang plugin schedules on
// the devices GPUTopology tracks and has no state of its own.
var ErrNoDeviceState = errors.New("the profile does not enable the " + Name + " plugin, whose device state " + GangName + " uses")

// Gang is the GPUTopologyGang plugin: the gang half of gputopo's
// scheduling. Its Permit holds a gang's members until the gang is
// complete, its PostFilter preempts whole jobs for a member (or rejects
// the gang's waiting members), and with the 1.37 pod-group cycle it is the
// PlacementGenerate and PlacementScore plugin. It works on the device
// state of the profile's GPUTopology plugin (the tracked devices, the
// topology cache, the reservations and the gangs assembling), which it
// reaches through the small deviceState interface. Create it with NewGang.
type Gang struct {
	handle fwk.Handle
	link   *profileLink
}

var (
	_ fwk.PermitPlugin            = (*Gang)(nil)
	_ fwk.PostFilterPlugin        = (*Gang)(nil)
	_ fwk.PlacementGeneratePlugin = (*Gang)(nil)
	_ fwk.PlacementScorePlugin    = (*Gang)(nil)
	_ fwk.EnqueueExtensions       = (*Gang)(nil)

	_ deviceState = (*Plugin)(nil)
)

// deviceState is what GPUTopologyGang uses of GPUTopology's per-profile
// state; GPUTopology's *Plugin satisfies it.
type deviceState interface {
	// permit holds a gang member until its gang is complete.
	permit(ctx context.Context, pod *v1.Pod) (*fwk.Status, time.Duration)
	// postFilter preempts for a gang member that fits no node.
	postFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status)
	// generatePlacements offers a PodGroup's placements.
	generatePlacements(ctx context.Context, st fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status)
	// scorePlacement ranks a PodGroup's placement.
	scorePlacement(ctx context.Context, st fwk.PlacementCycleState, pg fwk.PodGroupInfo, pl *fwk.PodGroupAssignments) (int64, *fwk.Status)
	// events are the cluster events that may help a rejected pod.
	events() []fwk.ClusterEventWithHint
	// reservation is the devices reserved for a pod.
	reservation(uid types.UID) (reservation, bool)
}

// The framework builds each plugin of a profile separately, in no fixed
// order, and hands both the profile's framework handle. GPUTopology's
// factory records its state under the handle (shareState); GPUTopologyGang's
// factory takes the profileLink of its handle, created by whichever of the
// two factories runs first, and reads the state through it once
// GPUTopology's factory has run. The entry is dropped when both have
// joined, or at the latest when the scheduler asks the profile's plugins
// for their events (EventsToRegister, after every profile is built), so
// the registry holds no profile beyond its construction; the link itself
// lives as long as the plugins that hold it (the profile).
var profiles = struct {
	sync.Mutex
	links map[fwk.Handle]*profileLink
}{links: map[fwk.Handle]*profileLink{}}

// profileLink is one profile's shared device state, set by GPUTopology's
// factory.
type profileLink struct {
	mu    sync.Mutex
	state deviceState
	gang  bool // a GPUTopologyGang plugin holds the link
}

// get returns the profile's device state, or nil while GPUTopology is
// not (yet) built.
func (l *profileLink) get() deviceState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// comparableHandle says whether h can key the registry.
func comparableHandle(h fwk.Handle) bool {
	return h != nil && reflect.TypeOf(h).Comparable()
}

// join returns the link of h, creating it; state, when not nil, is
// GPUTopology's, gang says a GPUTopologyGang plugin joins.
func join(h fwk.Handle, state deviceState, gang bool) (*profileLink, error) {
	profiles.Lock()
	defer profiles.Unlock()
	l, ok := profiles.links[h]
	if !ok {
		l = &profileLink{}
		profiles.links[h] = l
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state != nil {
		if l.state != nil {
			return nil, fmt.Errorf("%s: a second %s plugin for the same framework handle", Name, Name)
		}
		l.state = state
	}
	l.gang = l.gang || gang
	if l.state != nil && l.gang {
		delete(profiles.links, h) // both halves hold the link
	}
	return l, nil
}

// shareState records GPUTopology's state for the GPUTopologyGang plugin of
// the same profile (a nil or incomparable handle has no profile to
// share).
func shareState(h fwk.Handle, p *Plugin) error {
	if !comparableHandle(h) {
		return nil
	}
	_, err := join(h, p, false)
	return err
}

// unshareState drops the registry's entry of h (see profiles).
func unshareState(h fwk.Handle) {
	if !comparableHandle(h) {
		return
	}
	profiles.Lock()
	delete(profiles.links, h)
	profiles.Unlock()
}

// NewGang is the GPUTopologyGang plugin factory for app.WithPlugin. It
// takes no arguments: the gang settings (permitTimeoutSeconds,
// topologyLevels) are GPUTopology's Args. Without a framework handle it
// fails with an error wrapping ErrNoDeviceState. The framework may build
// it before GPUTopology, so in a profile without GPUTopology it fails
// later, with the same error, at EventsToRegister, which kube-scheduler
// calls while it is built, before it schedules any pod.
func NewGang(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if u, ok := obj.(*runtime.Unknown); ok && len(bytes.TrimSpace(u.Raw)) > 0 {
		var none struct{}
		d := json.NewDecoder(bytes.NewReader(u.Raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&none); err != nil {
			return nil, fmt.Errorf("%s: takes no arguments (the gang settings are %s's): %w", GangName, Name, err)
		}
	}
	if !comparableHandle(h) {
		return nil, fmt.Errorf("%s: no framework handle to find %s's state by: %w", GangName, Name, ErrNoDeviceState)
	}
	l, err := join(h, nil, true)
	if err != nil {
		return nil, err
	}
	return &Gang{handle: h, link: l}, nil
}

// state returns the profile's device state, or the error that says why
// there is none.
func (g *Gang) state() (deviceState, error) {
	if s := g.link.get(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%s: %w", GangName, ErrNoDeviceState)
}

// Name implements fwk.Plugin.
func (g *Gang) Name() string { return GangName }

// Permit implements fwk.PermitPlugin: it lets non-gang pods through and
// holds gang members until the gang is complete.
func (g *Gang) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	s, err := g.state()
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	return s.permit(ctx, pod)
}

// PostFilter implements fwk.PostFilterPlugin. It runs when the pod fits no
// node. For a gang member it rejects the gang's waiting members at once,
// releasing what they hold, rather than letting them wait for the Permit
// timeout, and preempts whole lower-priority jobs when that makes room
// (preempt.go).
func (g *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := g.state()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return s.postFilter(ctx, state, pod)
}

// GeneratePlacements implements fwk.PlacementGeneratePlugin: one
// placement per domain of the PodGroup's topology key where package gang
// places the group on the devices left free (see podgroupcycle.go).
func (g *Gang) GeneratePlacements(ctx context.Context, st fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	s, err := g.state()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	return s.generatePlacements(ctx, st, pg, parent)
}

// ScorePlacement implements fwk.PlacementScorePlugin: the placement's
// device-set score, less the GPUs it leaves stranded (see
// podgroupcycle.go).
func (g *Gang) ScorePlacement(ctx context.Context, st fwk.PlacementCycleState, pg fwk.PodGroupInfo, pl *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	s, err := g.state()
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return s.scorePlacement(ctx, st, pg, pl)
}

// PlacementScoreExtensions implements fwk.PlacementScorePlugin; scores need
// no normalising.
func (g *Gang) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return nil }

// EventsToRegister implements fwk.EnqueueExtensions: a gang member
// rejected at Permit (its gang timed out or failed) may fit once a pod
// holding GPUs is deleted, once a missing member of its gang is created,
// or once a node that can meet its request appears or changes (the events
// of GPUTopology, with the same queueing hints). Without GPUTopology in the
// profile it fails, wrapping ErrNoDeviceState, and so does building the
// scheduler.
func (g *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	unshareState(g.handle) // the profile's plugins are all built (see profiles)
	s, err := g.state()
	if err != nil {
		return nil, err
	}
	return s.events(), nil
}

// Reserved returns the devices the profile's GPUTopology plugin holds for
// a pod (for tests and debugging); false without GPUTopology.
func (g *Gang) Reserved(uid types.UID) (node string, devices []int, ok bool) {
	s, err := g.state()
	if err != nil {
		return "", nil, false
	}
	r, ok := s.reservation(uid)
	return r.node, slices.Clone(r.devices), ok
}
