package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	resourcev1ac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// Errors wrapped by the package; branch on them with errors.Is.
var (
	// ErrConfig: the agent's options are unusable.
	ErrConfig = errors.New("nodeagent: bad configuration")
	// ErrRender: the topology cannot be turned into labels, annotation
	// and slices (too large, invalid slices).
	ErrRender = errors.New("nodeagent: cannot render topology")
	// ErrDiscover: the topology source failed; what was published stays.
	ErrDiscover = errors.New("nodeagent: topology source failed")
	// ErrPublish: the API server refused or could not be reached.
	ErrPublish = errors.New("nodeagent: publishing failed")
	// ErrNoNode: the Node object does not exist (the agent never creates it).
	ErrNoNode = errors.New("nodeagent: node not found")
	// ErrOverride: a HealthOverlay override names a device the node lacks.
	ErrOverride = errors.New("nodeagent: bad health override")
)

// Defaults of Options.
const (
	DefaultFieldManager   = "gputopo-node-agent"
	DefaultInterval       = 30 * time.Second
	DefaultResync         = 10 * time.Minute
	DefaultCleanupTimeout = 30 * time.Second
)

// Options configures an Agent. NodeName and Source are required.
type Options struct {
	// NodeName is the Node object to publish on; it must exist.
	NodeName string
	// Source discovers the topology: detect.Detect's providers wrapped
	// with provider.Static, provider.File, provider.Catalog, or a
	// HealthOverlay over any of them.
	Source provider.TopologyProvider
	// Driver is the DRA driver name of the slices; dra.DefaultDriver when empty.
	Driver string
	// FieldManager is the server-side-apply field manager;
	// DefaultFieldManager when empty.
	FieldManager string
	// Interval is how often the source is polled; DefaultInterval when 0.
	Interval time.Duration
	// Resync republishes unchanged content this often, repairing edits
	// and deletions by others; DefaultResync when 0, never when negative.
	Resync time.Duration
	// CleanupOnExit makes Run remove what it published when its context
	// ends (see Agent.Cleanup).
	CleanupOnExit bool
	// CleanupTimeout bounds that cleanup; DefaultCleanupTimeout when 0.
	CleanupTimeout time.Duration
	// WholeGPUsOnly publishes no MIG partition devices.
	WholeGPUsOnly bool
	// PCIeRoot resolves the standard pcieRoot attribute (SysfsPCIeRoot on
	// a real node); nil publishes none.
	PCIeRoot PCIeRootFunc
	// DeviceTaints publishes an unhealthy GPU with a NoSchedule device
	// taint instead of leaving it out, and taints GPUs with degraded
	// NVLink (see package dra). An API server that drops the taints (one
	// before Kubernetes 1.36, or with DRADeviceTaints off) would make the
	// unhealthy GPU allocatable: the agent checks what the server stored
	// and, when the taints are gone, republishes without the unhealthy
	// GPUs and stops tainting (State.TaintsDropped).
	DeviceTaints bool
	// SharedCapacity publishes whole GPUs as shareable by consumable
	// memory and compute (see package dra).
	SharedCapacity bool
}

// State is what the agent last did, for health endpoints and tests.
type State struct {
	// Hash of the publication on the API server; "" before the first
	// publish and after Cleanup.
	Hash string
	// Generation is the pool generation of the published slices.
	Generation int64
	// Published is when it was published.
	Published time.Time
	// Took is how long that publication's API calls took.
	Took time.Duration
	// Publishes counts successful publications (changed content or resync).
	Publishes int
	// Devices and Healthy count the accelerators of the last publication.
	Devices, Healthy int
	// Err is the error of the last Sync; nil when it succeeded.
	Err error
	// TaintsDropped says the API server did not store the device taints
	// the agent published; the agent has since published without them
	// (unhealthy GPUs left out).
	TaintsDropped bool
}

// Agent publishes one node's topology: labels and the topology annotation
// on the Node object, and the node's DRA ResourceSlices. Its methods are
// safe for concurrent use.
type Agent struct {
	client kubernetes.Interface
	opts   Options

	mu    sync.Mutex
	state State
	// slices is the set of slice names last published.
	slices map[string]bool
	// genKnown says state.Generation has been read from the API server.
	genKnown bool
	// rendered is the last rendered publication, for the topology of
	// renderedKey.
	rendered    *Publication
	renderedKey renderKey
}

// renderKey identifies a topology for Render's purposes: its content
// (health included) and its name.
type renderKey struct {
	fp   topology.Fingerprint
	name string
}

// New returns an agent publishing through client.
func New(client kubernetes.Interface, opts Options) (*Agent, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: no Kubernetes client", ErrConfig)
	}
	if opts.NodeName == "" {
		return nil, fmt.Errorf("%w: no node name", ErrConfig)
	}
	if opts.Source == nil {
		return nil, fmt.Errorf("%w: no topology source", ErrConfig)
	}
	if opts.Interval < 0 || opts.CleanupTimeout < 0 {
		return nil, fmt.Errorf("%w: negative interval or cleanup timeout", ErrConfig)
	}
	if opts.Driver == "" {
		opts.Driver = dra.DefaultDriver
	}
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.CleanupTimeout == 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	return &Agent{client: client, opts: opts}, nil
}

// State returns what the agent last did.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

// Run syncs at once and then every Interval until ctx ends; a failed sync
// is logged and retried at the next tick. With CleanupOnExit it then
// removes what it published (under a fresh context bounded by
// CleanupTimeout) and returns that cleanup's error; otherwise nil.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", a.opts.NodeName, "source", a.opts.Source.Name())
	ticker := time.NewTicker(a.opts.Interval)
	defer ticker.Stop()
	for {
		if changed, err := a.Sync(ctx); err != nil {
			if ctx.Err() == nil {
				logger.Error(err, "Publishing the node topology failed; retrying next interval")
			}
		} else if changed {
			st := a.State()
			logger.Info("Published the node topology", "generation", st.Generation, "took", st.Took, "devices", st.Devices, "healthy", st.Healthy)
		}
		select {
		case <-ctx.Done():
			if !a.opts.CleanupOnExit {
				return nil
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.CleanupTimeout)
			defer cancel()
			if err := a.Cleanup(cctx); err != nil {
				logger.Error(err, "Removing the published topology failed")
				return err
			}
			logger.Info("Removed the published topology")
			return nil
		case <-ticker.C:
		}
	}
}

// Sync discovers the topology once and publishes it when it differs from
// what this agent last published (or Resync has passed). It reports
// whether it published. On error, what was published before stays.
func (a *Agent) Sync(ctx context.Context) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed, err := a.sync(ctx)
	a.state.Err = err
	return changed, err
}

func (a *Agent) sync(ctx context.Context) (bool, error) {
	n, err := a.opts.Source.Discover(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrDiscover, a.opts.Source.Name(), err)
	}
	// Rendering a MIG machine takes milliseconds; the fingerprint (which
	// covers health) and the name decide whether it can be skipped.
	// A resync renders afresh too.
	resync := a.opts.Resync >= 0 && time.Since(a.state.Published) >= a.opts.Resync
	key := renderKey{n.Fingerprint(), n.Name()}
	pub := a.rendered
	if resync {
		pub = nil
	}
	if pub == nil || key != a.renderedKey {
		pub, err = a.render(n)
		if err != nil {
			return false, err
		}
		a.rendered, a.renderedKey = pub, key
	}
	if pub.Hash == a.state.Hash && !resync {
		return false, nil
	}
	start := time.Now()
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("%w: %q", ErrNoNode, a.opts.NodeName)
	}
	if err != nil {
		return false, fmt.Errorf("%w: reading node %q: %w", ErrPublish, a.opts.NodeName, err)
	}
	if !a.genKnown {
		existing, err := a.listSlices(ctx)
		if err != nil {
			return false, err
		}
		for _, s := range existing {
			a.state.Generation = max(a.state.Generation, s.Spec.Pool.Generation)
		}
		a.genKnown = true
	}
	// Slices first: a scheduler that sees the new labels should find the
	// matching devices.
	gen := a.state.Generation + 1
	names, dropped, err := a.applySlices(ctx, node, pub.Slices, gen)
	if err != nil {
		return false, err
	}
	a.state.Generation = gen
	if dropped {
		// The server stored the devices without their taints: an
		// unhealthy GPU is allocatable right now. Publish without taints
		// (unhealthy GPUs left out) at once, and from now on.
		a.state.TaintsDropped = true
		klog.FromContext(ctx).Info("The API server dropped the device taints (DRADeviceTaints off?); publishing without unhealthy devices", "node", a.opts.NodeName)
		if pub, err = a.render(n); err != nil {
			return false, err
		}
		a.rendered = pub
		gen++
		if names, _, err = a.applySlices(ctx, node, pub.Slices, gen); err != nil {
			return false, err
		}
		a.state.Generation = gen
	}
	nodeAC := corev1ac.Node(a.opts.NodeName).WithLabels(pub.Labels).WithAnnotations(pub.Annotations)
	if _, err := a.client.CoreV1().Nodes().Apply(ctx, nodeAC, a.applyOptions()); err != nil {
		return false, fmt.Errorf("%w: applying labels and annotation to node %q: %w", ErrPublish, a.opts.NodeName, err)
	}
	if err := a.deleteSlices(ctx, names); err != nil {
		return false, err
	}
	a.slices = names
	a.state.Hash, a.state.Published, a.state.Took = pub.Hash, time.Now(), time.Since(start)
	a.state.Devices, a.state.Healthy = pub.Devices, pub.Healthy
	a.state.Publishes++
	return true, nil
}

// render renders n with the agent's options (no taints once the server
// has dropped them).
func (a *Agent) render(n *topology.Node) (*Publication, error) {
	return Render(n, RenderOptions{NodeName: a.opts.NodeName, Driver: a.opts.Driver,
		WholeGPUsOnly: a.opts.WholeGPUsOnly, PCIeRoot: a.opts.PCIeRoot,
		DeviceTaints: a.opts.DeviceTaints && !a.state.TaintsDropped, SharedCapacity: a.opts.SharedCapacity})
}

func (a *Agent) applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: a.opts.FieldManager, Force: true}
}

// applySlices applies every slice with pool generation gen, owned by the
// Node (so they go when it is deleted), and returns their names, and
// whether the server stored a tainted device without its taints.
func (a *Agent) applySlices(ctx context.Context, node *corev1.Node, slices []resourceapi.ResourceSlice, gen int64) (map[string]bool, bool, error) {
	names := map[string]bool{}
	dropped := false
	for i := range slices {
		s := slices[i].DeepCopy()
		s.Spec.Pool.Generation = gen
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: new(true)}}
		ac, err := sliceApplyConfiguration(s)
		if err != nil {
			return nil, false, fmt.Errorf("%w: slice %q: %w", ErrPublish, s.Name, err)
		}
		stored, err := a.client.ResourceV1().ResourceSlices().Apply(ctx, ac, a.applyOptions())
		if err != nil {
			return nil, false, fmt.Errorf("%w: applying resource slice %q: %w", ErrPublish, s.Name, err)
		}
		dropped = dropped || taintsDropped(s, stored)
		names[s.Name] = true
	}
	return names, dropped, nil
}

// taintsDropped reports whether stored lacks a taint that sent has.
func taintsDropped(sent, stored *resourceapi.ResourceSlice) bool {
	kept := map[string]int{}
	for _, d := range stored.Spec.Devices {
		kept[d.Name] = len(d.Taints)
	}
	for _, d := range sent.Spec.Devices {
		if len(d.Taints) > kept[d.Name] {
			return true
		}
	}
	return false
}

// sliceApplyConfiguration converts a typed slice into an apply
// configuration through JSON: the configuration types carry the same JSON
// names, with every field optional, so zero fields stay unset.
func sliceApplyConfiguration(s *resourceapi.ResourceSlice) (*resourcev1ac.ResourceSliceApplyConfiguration, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	ac := resourcev1ac.ResourceSlice(s.Name)
	if err := json.Unmarshal(b, ac); err != nil {
		return nil, err
	}
	ac.WithAPIVersion(resourceapi.SchemeGroupVersion.String()).WithKind("ResourceSlice")
	return ac, nil
}

// listSlices lists the slices of this node and driver.
func (a *Agent) listSlices(ctx context.Context) ([]resourceapi.ResourceSlice, error) {
	sel := fields.Set{resourceapi.ResourceSliceSelectorNodeName: a.opts.NodeName, resourceapi.ResourceSliceSelectorDriver: a.opts.Driver}
	list, err := a.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("%w: listing resource slices of node %q: %w", ErrPublish, a.opts.NodeName, err)
	}
	// The field selector is the API server's filter; check again, for
	// clients (fakes) that ignore it.
	var out []resourceapi.ResourceSlice
	for _, s := range list.Items {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == a.opts.NodeName && s.Spec.Driver == a.opts.Driver {
			out = append(out, s)
		}
	}
	return out, nil
}

// deleteSlices deletes this node's and driver's slices not in keep.
func (a *Agent) deleteSlices(ctx context.Context, keep map[string]bool) error {
	existing, err := a.listSlices(ctx)
	if err != nil {
		return err
	}
	for _, s := range existing {
		if keep[s.Name] {
			continue
		}
		err := a.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("%w: deleting resource slice %q: %w", ErrPublish, s.Name, err)
		}
	}
	return nil
}

// Cleanup removes what the agent publishes: the labels and annotation its
// field manager owns (by applying an empty configuration; values another
// manager also owns stay) and every ResourceSlice of this node and driver.
// A missing Node is not an error. The next Sync publishes afresh.
func (a *Agent) Cleanup(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state.Hash, a.slices = "", nil
	var errs []error
	_, err := a.client.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		errs = append(errs, fmt.Errorf("%w: reading node %q: %w", ErrPublish, a.opts.NodeName, err))
	default:
		// Applying an empty configuration drops every field this manager
		// owns. An apply creates a missing object, hence the Get first (a
		// node deleted in between would come back as a bare Node object).
		_, err := a.client.CoreV1().Nodes().Apply(ctx, corev1ac.Node(a.opts.NodeName), a.applyOptions())
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%w: removing labels and annotation from node %q: %w", ErrPublish, a.opts.NodeName, err))
		}
	}
	if err := a.deleteSlices(ctx, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
