package draplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// Errors of Prepare and Unprepare; each wraps the cause (a mig sentinel
// such as mig.ErrOverlap when the manager refused a step).
var (
	// ErrConfig: Config is unusable.
	ErrConfig = errors.New("draplugin: bad configuration")
	// ErrUnknownGPU: a device names a GPU index the plugin has no GPU for,
	// or one the partition manager does not list.
	ErrUnknownGPU = errors.New("draplugin: unknown GPU")
	// ErrSlotTaken: the allocated placement holds an instance another
	// claim prepared, or one of another profile.
	ErrSlotTaken = errors.New("draplugin: placement already taken")
	// ErrPartition: the partition manager refused to create or destroy an
	// instance.
	ErrPartition = errors.New("draplugin: MIG change failed")
	// ErrState: the checkpoint or a CDI spec could not be read or written.
	ErrState = errors.New("draplugin: state file")
)

// DefaultCDIDir is where CDI spec files go when Config.CDIDir is empty.
const DefaultCDIDir = "/var/run/cdi"

// Config configures a Driver.
type Config struct {
	// DriverName is the DRA driver name; dra.DefaultDriver when empty. It
	// must match the name the node agent publishes slices under.
	DriverName string
	// Manager creates and destroys MIG instances.
	Manager mig.PartitionManager
	// GPUs maps a GPU index of the published slices (topology.Device.Index)
	// to the GPU's identifier in Manager's layouts and steps (the UUID for
	// the NVIDIA manager).
	GPUs map[int]string
	// CDIDir is the directory CDI spec files are written to; DefaultCDIDir
	// when empty.
	CDIDir string
	// Checkpoint is the JSON file recording prepared claims; required.
	Checkpoint string
	// DryRun checks every MIG step with mig.DryRun and changes nothing on
	// the GPUs (CDI specs and the checkpoint are still written).
	DryRun bool
	// InstanceID, when set, returns the ID the container runtime knows a
	// prepared MIG instance by ("MIG-<uuid>"); it becomes the CDI device's
	// NVIDIA_VISIBLE_DEVICES. When nil, New uses Manager's
	// mig.InstanceNamer if it has one (the NVIDIA manager and migtest.Fake
	// do). Without either, a MIG device's CDI device sets
	// NVIDIA_VISIBLE_DEVICES=none (the container gets no GPU rather than the
	// whole parent GPU) besides the GPUTOPO_MIG_* variables naming parent
	// GPU, profile and placement, and every such prepare logs a warning.
	InstanceID func(ctx context.Context, gpu string, in mig.Instance) (string, error)
}

// PreparedDevice is one device of a prepared claim, as the checkpoint
// keeps it.
type PreparedDevice struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// GPU is the manager's GPU identifier.
	GPU string `json:"gpu"`
	// Profile and Placement are set for MIG devices.
	Profile   string        `json:"profile,omitempty"`
	Placement mig.Placement `json:"placement,omitzero"`
	// Created is true when this claim's prepare created the instance (and
	// so its unprepare destroys it).
	Created bool `json:"created,omitempty"`
	// UUID is the prepared MIG instance's "MIG-<uuid>" (Config.InstanceID),
	// empty when unknown.
	UUID  string `json:"uuid,omitempty"`
	CDIID string `json:"cdiID"`
}

// PreparedClaim is one prepared claim in the checkpoint.
type PreparedClaim struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
}

type checkpoint struct {
	Claims map[types.UID]PreparedClaim `json:"claims"`
}

// Driver implements kubeletplugin.DRAPlugin. It is safe for concurrent use
// (calls are serialised).
type Driver struct {
	cfg Config
	mu  sync.Mutex
	cp  checkpoint
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// New returns a Driver, loading the checkpoint if it exists.
func New(cfg Config) (*Driver, error) {
	if cfg.DriverName == "" {
		cfg.DriverName = dra.DefaultDriver
	}
	if cfg.CDIDir == "" {
		cfg.CDIDir = DefaultCDIDir
	}
	if cfg.Manager == nil {
		return nil, fmt.Errorf("%w: no partition manager", ErrConfig)
	}
	if cfg.Checkpoint == "" {
		return nil, fmt.Errorf("%w: no checkpoint file", ErrConfig)
	}
	if cfg.InstanceID == nil {
		if n, ok := cfg.Manager.(mig.InstanceNamer); ok {
			cfg.InstanceID = func(ctx context.Context, gpu string, in mig.Instance) (string, error) {
				return n.InstanceUUID(ctx, gpu, in.Placement)
			}
		} else {
			klog.Background().Info("Warning: the partition manager cannot name MIG instances (no mig.InstanceNamer, no Config.InstanceID); "+
				"CDI specs of MIG devices will set NVIDIA_VISIBLE_DEVICES=none", "manager", fmt.Sprintf("%T", cfg.Manager))
		}
	}
	d := &Driver{cfg: cfg, cp: checkpoint{Claims: map[types.UID]PreparedClaim{}}}
	b, err := os.ReadFile(cfg.Checkpoint)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	default:
		if err := json.Unmarshal(b, &d.cp); err != nil {
			return nil, fmt.Errorf("%w: checkpoint %s: %w", ErrState, cfg.Checkpoint, err)
		}
		if d.cp.Claims == nil {
			d.cp.Claims = map[types.UID]PreparedClaim{}
		}
	}
	return d, nil
}

// Prepared returns a copy of the prepared claims.
func (d *Driver) Prepared() map[types.UID]PreparedClaim {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]PreparedClaim, len(d.cp.Claims))
	for k, v := range d.cp.Claims {
		v.Devices = slices.Clone(v.Devices)
		out[k] = v
	}
	return out
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: for each claim,
// every device allocated from this driver is made real (a MIG partition is
// created at its placement) and named in a CDI spec. A claim already
// prepared gets its recorded devices back unchanged.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		pc, err := d.prepare(ctx, c)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Prepare failed", "claim", klog.KObj(c))
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: result(pc)}
	}
	return out, nil
}

func result(pc PreparedClaim) []kubeletplugin.Device {
	var out []kubeletplugin.Device
	for _, p := range pc.Devices {
		out = append(out, kubeletplugin.Device{Requests: []string{p.Request}, PoolName: p.Pool, DeviceName: p.Device, CDIDeviceIDs: []string{p.CDIID}})
	}
	return out
}

func (d *Driver) prepare(ctx context.Context, c *resourceapi.ResourceClaim) (PreparedClaim, error) {
	if pc, ok := d.cp.Claims[c.UID]; ok {
		return pc, nil
	}
	if c.Status.Allocation == nil {
		return PreparedClaim{}, fmt.Errorf("claim %s/%s is not allocated", c.Namespace, c.Name)
	}
	pc := PreparedClaim{Namespace: c.Namespace, Name: c.Name}
	var layouts []*mig.Layout
	var edits []cdiDevice
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.cfg.DriverName {
			continue
		}
		ref, err := ParseDeviceName(r.Device)
		if err != nil {
			d.rollback(ctx, pc)
			return PreparedClaim{}, err
		}
		gpu, ok := d.cfg.GPUs[ref.GPU]
		if !ok {
			d.rollback(ctx, pc)
			return PreparedClaim{}, fmt.Errorf("%w: device %s: no GPU index %d on this node", ErrUnknownGPU, r.Device, ref.GPU)
		}
		pd := PreparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, GPU: gpu,
			CDIID: cdiID(d.cfg.DriverName, c.UID, r.Device)}
		env := []string{"GPUTOPO_GPU=" + gpu}
		if ref.MIG {
			if layouts == nil {
				if layouts, err = d.cfg.Manager.Layouts(ctx); err != nil {
					d.rollback(ctx, pc)
					return PreparedClaim{}, fmt.Errorf("%w: reading layouts: %w", ErrPartition, err)
				}
			}
			in, created, err := d.create(ctx, layouts, ref, gpu, c.UID)
			if err != nil {
				d.rollback(ctx, pc)
				return PreparedClaim{}, fmt.Errorf("device %s: %w", r.Device, err)
			}
			pd.Profile, pd.Placement, pd.Created = in.Profile.String(), in.Placement, created
			pc.Devices = append(pc.Devices, pd)
			env = append(env, "GPUTOPO_MIG_PROFILE="+pd.Profile, fmt.Sprintf("GPUTOPO_MIG_PLACEMENT=%d:%d", in.Placement.Start, in.Placement.Size))
			switch {
			case d.cfg.DryRun:
				env = append(env, "NVIDIA_VISIBLE_DEVICES=none")
			case d.cfg.InstanceID == nil:
				klog.FromContext(ctx).Info("Warning: MIG instance prepared without its UUID; the container gets NVIDIA_VISIBLE_DEVICES=none",
					"claim", klog.KObj(c), "device", r.Device, "gpu", gpu, "placement", in.Placement.String())
				env = append(env, "NVIDIA_VISIBLE_DEVICES=none")
			default:
				id, err := d.cfg.InstanceID(ctx, gpu, in)
				if err == nil && id == "" {
					err = errors.New("empty ID")
				}
				if err != nil {
					d.rollback(ctx, pc)
					return PreparedClaim{}, fmt.Errorf("%w: device %s: instance ID: %w", ErrPartition, r.Device, err)
				}
				pc.Devices[len(pc.Devices)-1].UUID = id
				env = append(env, "NVIDIA_VISIBLE_DEVICES="+id, "GPUTOPO_MIG_UUID="+id)
			}
		} else {
			pc.Devices = append(pc.Devices, pd)
			env = append(env, "NVIDIA_VISIBLE_DEVICES="+gpu)
		}
		edits = append(edits, cdiDevice{Name: cdiName(c.UID, r.Device), ContainerEdits: cdiEdits{Env: env}})
	}
	if err := writeCDISpec(d.cfg.CDIDir, d.cfg.DriverName, c.UID, edits); err != nil {
		d.rollback(ctx, pc)
		return PreparedClaim{}, err
	}
	d.cp.Claims[c.UID] = pc
	if err := d.save(); err != nil {
		delete(d.cp.Claims, c.UID)
		d.rollback(ctx, pc)
		_ = removeCDISpec(d.cfg.CDIDir, d.cfg.DriverName, c.UID)
		return PreparedClaim{}, err
	}
	return pc, nil
}

// create makes the GPU instance ref names (idempotently) and updates
// layouts to match. It returns the instance and whether it created the GPU
// instance.
func (d *Driver) create(ctx context.Context, layouts []*mig.Layout, ref DeviceRef, gpu string, uid types.UID) (mig.Instance, bool, error) {
	i := slices.IndexFunc(layouts, func(l *mig.Layout) bool { return l.GPU == gpu })
	if i < 0 {
		return mig.Instance{}, false, fmt.Errorf("%w: the partition manager lists no MIG GPU %q (index %d)", ErrUnknownGPU, gpu, ref.GPU)
	}
	l := layouts[i]
	p, pl, err := ref.Resolve(l.Model)
	if err != nil {
		return mig.Instance{}, false, err
	}
	want := mig.Instance{Profile: p.Name, Placement: pl}
	mode := mig.Commit
	if d.cfg.DryRun {
		mode = mig.DryRun
	}
	apply := func(s mig.Step) error {
		if err := d.cfg.Manager.Apply(ctx, s, mode); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrPartition, s, err)
		}
		if mode == mig.Commit {
			return mig.ApplyStep(layouts, s)
		}
		return nil
	}
	created := false
	if have, ok := l.InstanceAt(pl.Start); ok {
		if have.Profile != p.Name || have.Placement != pl {
			return mig.Instance{}, false, fmt.Errorf("%w: %s at %s holds %s", ErrSlotTaken, gpu, pl, have)
		}
		if owner, taken := d.holder(gpu, pl); taken && owner != uid {
			return mig.Instance{}, false, fmt.Errorf("%w: %s %s is prepared for claim %s", ErrSlotTaken, gpu, have, owner)
		}
		if !have.NoComputeInstance {
			return want, false, nil
		}
	} else {
		if err := apply(mig.Step{Kind: mig.StepCreateGPUInstance, GPU: gpu, Profile: p.Name, Placement: pl, Why: "prepare claim " + string(uid)}); err != nil {
			return mig.Instance{}, false, err
		}
		created = true
		if mode == mig.DryRun {
			return want, created, nil
		}
	}
	if err := apply(mig.Step{Kind: mig.StepCreateComputeInstance, GPU: gpu, Placement: pl, Why: "prepare claim " + string(uid)}); err != nil {
		if created {
			d.destroy(ctx, PreparedDevice{GPU: gpu, Placement: pl, Created: true})
		}
		return mig.Instance{}, false, err
	}
	return want, created, nil
}

// holder returns the prepared claim holding the instance at pl on gpu.
func (d *Driver) holder(gpu string, pl mig.Placement) (types.UID, bool) {
	for uid, pc := range d.cp.Claims {
		for _, p := range pc.Devices {
			if p.GPU == gpu && p.Profile != "" && p.Placement == pl {
				return uid, true
			}
		}
	}
	return "", false
}

// destroy removes a prepared MIG instance: its compute instance, then its
// GPU instance. Instances the claim found already there stay.
func (d *Driver) destroy(ctx context.Context, p PreparedDevice) error {
	if p.Placement.Size == 0 || !p.Created || d.cfg.DryRun {
		return nil
	}
	ls, err := d.cfg.Manager.Layouts(ctx)
	if err != nil {
		return fmt.Errorf("%w: reading layouts: %w", ErrPartition, err)
	}
	i := slices.IndexFunc(ls, func(l *mig.Layout) bool { return l.GPU == p.GPU })
	if i < 0 {
		return fmt.Errorf("%w: the partition manager lists no MIG GPU %q", ErrUnknownGPU, p.GPU)
	}
	in, ok := ls[i].InstanceAt(p.Placement.Start)
	if !ok || in.Placement != p.Placement {
		return nil // already gone
	}
	var steps []mig.Step
	if !in.NoComputeInstance {
		steps = append(steps, mig.Step{Kind: mig.StepDestroyComputeInstance, GPU: p.GPU, Placement: p.Placement})
	}
	steps = append(steps, mig.Step{Kind: mig.StepDestroyGPUInstance, GPU: p.GPU, Placement: p.Placement})
	for _, s := range steps {
		if err := d.cfg.Manager.Apply(ctx, s, mig.Commit); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrPartition, s, err)
		}
	}
	return nil
}

// rollback destroys what a failed prepare created.
func (d *Driver) rollback(ctx context.Context, pc PreparedClaim) {
	for _, p := range slices.Backward(pc.Devices) {
		if err := d.destroy(ctx, p); err != nil {
			klog.FromContext(ctx).Error(err, "Rollback of a failed prepare left an instance", "device", p.Device)
		}
	}
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: the MIG
// instances a claim's prepare created are destroyed and its CDI spec
// removed. A claim not prepared (or already unprepared) is no error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = d.unprepare(ctx, c.UID)
		if out[c.UID] != nil {
			klog.FromContext(ctx).Error(out[c.UID], "Unprepare failed", "claim", c.NamespacedName)
		}
	}
	return out, nil
}

func (d *Driver) unprepare(ctx context.Context, uid types.UID) error {
	pc, ok := d.cp.Claims[uid]
	if !ok {
		return removeCDISpec(d.cfg.CDIDir, d.cfg.DriverName, uid)
	}
	for i, p := range slices.Backward(pc.Devices) {
		if err := d.destroy(ctx, p); err != nil {
			// Keep what is left so a retry finishes the job.
			pc.Devices = pc.Devices[:i+1]
			d.cp.Claims[uid] = pc
			return errors.Join(err, d.save())
		}
	}
	if err := removeCDISpec(d.cfg.CDIDir, d.cfg.DriverName, uid); err != nil {
		return err
	}
	delete(d.cp.Claims, uid)
	return d.save()
}

// HandleError implements kubeletplugin.DRAPlugin: background errors are
// logged (the plugin publishes no slices itself; the node agent does).
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: health is not
// reported (the node agent leaves unhealthy GPUs out of the slices).
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// save writes the checkpoint atomically.
func (d *Driver) save() error {
	b, err := json.MarshalIndent(d.cp, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	return writeAtomic(d.cfg.Checkpoint, b)
}

func writeAtomic(name string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	return nil
}
