package nvidiatest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// Call identifies one NVML call made to a Machine, for Hook.
type Call struct {
	// GPU is the device index, -1 for library-level calls.
	GPU int
	// Method is the nvml.Device (or Library, GPUInstance,
	// ComputeInstance) method name, e.g. "NVLinkState".
	Method string
	// Version is the struct version of a versioned call, else 0.
	Version int
	// Arg is the link number, profile index or id, peer GPU index, MIG device
	// index, or (for GPUInstance and MIGDevice calls) GPU instance id the
	// call names, else -1.
	Arg int
}

// Machine is a fake NVML library. Set its fields before use; while a
// provider uses it, change it only through its methods. It is safe for
// concurrent use.
type Machine struct {
	// GPUs are the devices, in NVML index order.
	GPUs []*GPU
	// Driver is the driver version string.
	Driver string
	// InitErr, when non-nil, is what Init returns.
	InitErr error
	// Hook, when non-nil, is consulted before every call made after Init;
	// a non-nil error is returned instead of the answer. Use it to make a
	// GPU fall off the bus mid-discovery or a function be missing from an
	// older driver. It runs with the Machine locked and must not call the
	// Machine's methods.
	Hook func(Call) error
	// Record makes the Machine keep every call for Log.
	Record bool

	mu         sync.Mutex
	inits      int
	calls      int
	violations []string
	log        []Call
}

// GPU is one fake device and the answers NVML gives about it. Nil slices and
// pointers mean "not supported" for the matching call.
type GPU struct {
	// UUID and Name are the GPU's UUID and product name.
	UUID, Name string
	// BusID is the NVML form, "00000000:3B:00.0".
	BusID string
	// DeviceID is the combined PCI device and vendor id.
	DeviceID uint32
	// Arch is the architecture.
	Arch nvml.Architecture
	// Memory is the framebuffer memory.
	Memory nvml.MemoryInfo
	// Utilization is what UtilizationRates answers; nil means not
	// supported. A GPU whose MIG mode is on answers not supported whatever
	// this holds, as NVML does.
	Utilization *nvml.Utilization
	// UtilizationErr, when non-nil, is what UtilizationRates answers
	// instead of a value (a failed read).
	UtilizationErr error
	// TemperatureC is the GPU die temperature both Temperature versions
	// answer; nil means no sensor (not supported). Make a version missing
	// from an older or newer driver with Hook (Method "Temperature",
	// Version 1 or 2).
	TemperatureC *int
	// TemperatureErr, when non-nil, is what Temperature answers instead of
	// a value.
	TemperatureErr error
	// MemoryNUMA is the GPU memory's own NUMA node; -1 means not supported.
	MemoryNUMA int
	// NUMANodes is the memory affinity; nil means not supported.
	NUMANodes []int
	// CPUs is the CPU affinity; nil means not supported.
	CPUs []int
	// Links are the NVLinks, by link number; nil means no NVLink.
	Links []Link
	// Ancestor maps a peer GPU index to the common-ancestor level.
	Ancestor map[int]nvml.TopologyLevel
	// P2P maps a peer GPU index to the P2P status per capability; a
	// missing capability answers P2PNotSupported.
	P2P map[int]map[nvml.P2PCapability]nvml.P2PStatus
	// Fabric is the fabric registration; nil means not supported.
	Fabric *nvml.FabricInfo
	// FabricVersion is the newest fabric-info struct version the driver
	// knows (1..3); newer versions answer "argument version mismatch".
	FabricVersion int
	// MIG is the MIG state; nil means MIG is not supported.
	MIG *MIG
	// GPM is the GPU Performance Monitoring state; nil means the GPU does
	// not support GPM (before Hopper).
	GPM *GPM
	// Lost makes every call on the GPU's handle answer GPU-is-lost, as
	// for a GPU that fell off the bus.
	Lost bool
	// Processes are the compute processes running on the GPU. A process
	// pins its MIG GPU instance: destroying that instance's compute
	// instance answers "in use".
	Processes []nvml.Process
}

// Link is one NVLink of a fake GPU.
type Link struct {
	// Active is the link state.
	Active bool
	// RemoteBusID is the far end's bus id in NVML form.
	RemoteBusID string
	// RemoteType is what the far end is.
	RemoteType nvml.NVLinkDeviceType
}

// Calls returns the number of calls answered or refused since the Machine
// was created.
func (m *Machine) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// Violations returns the calls made while NVML was not initialised (a real
// process would have died on most of them), and unbalanced Shutdowns.
func (m *Machine) Violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.violations)
}

// Initialized reports whether Init has succeeded more often than Shutdown
// has been called.
func (m *Machine) Initialized() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inits > 0
}

// Log returns every call made after a successful Init while Record was
// set, in order.
func (m *Machine) Log() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// enter checks and records a call; it returns the error to answer with.
// The caller holds no lock; enter takes it and returns with it held, so the
// answer is consistent. The caller must call m.mu.Unlock.
func (m *Machine) enter(c Call) error {
	m.mu.Lock()
	m.calls++
	if m.inits == 0 {
		m.violations = append(m.violations, fmt.Sprintf("%s (GPU %d) called while NVML is not initialised", c.Method, c.GPU))
		return nvml.CodeUninitialized
	}
	if m.Record {
		m.log = append(m.log, c)
	}
	if m.Hook != nil {
		if err := m.Hook(c); err != nil {
			return err
		}
	}
	return nil
}

// Init implements nvml.Library.
func (m *Machine) Init() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.InitErr != nil {
		return m.InitErr
	}
	m.inits++
	return nil
}

// Shutdown implements nvml.Library.
func (m *Machine) Shutdown() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.inits == 0 {
		m.violations = append(m.violations, "Shutdown called without a successful Init")
		return nvml.CodeUninitialized
	}
	m.inits--
	return nil
}

// DriverVersion implements nvml.Library.
func (m *Machine) DriverVersion() (string, error) {
	err := m.enter(Call{GPU: -1, Method: "DriverVersion", Arg: -1})
	defer m.mu.Unlock()
	if err != nil {
		return "", err
	}
	return m.Driver, nil
}

// DeviceCount implements nvml.Library.
func (m *Machine) DeviceCount() (int, error) {
	err := m.enter(Call{GPU: -1, Method: "DeviceCount", Arg: -1})
	defer m.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(m.GPUs), nil
}

// DeviceByIndex implements nvml.Library.
func (m *Machine) DeviceByIndex(i int) (nvml.Device, error) {
	err := m.enter(Call{GPU: i, Method: "DeviceByIndex", Arg: -1})
	defer m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(m.GPUs) {
		return nil, nvml.CodeInvalidArgument
	}
	return &device{m: m, i: i}, nil
}

// device is a handle to GPU i of m.
type device struct {
	m *Machine
	i int
}

var _ nvml.Device = (*device)(nil)

// call enters m for a device call and returns the GPU (with m.mu held).
func (d *device) call(method string, version, arg int) (*GPU, error) {
	err := d.m.enter(Call{GPU: d.i, Method: method, Version: version, Arg: arg})
	g := d.m.GPUs[d.i]
	if err == nil && g.Lost {
		err = nvml.CodeGPUIsLost
	}
	return g, err
}

func (d *device) UUID() (string, error) {
	g, err := d.call("UUID", 0, -1)
	defer d.m.mu.Unlock()
	return g.UUID, err
}

func (d *device) Name() (string, error) {
	g, err := d.call("Name", 0, -1)
	defer d.m.mu.Unlock()
	return g.Name, err
}

func (d *device) PCIInfo() (nvml.PCIInfo, error) {
	g, err := d.call("PCIInfo", 0, -1)
	defer d.m.mu.Unlock()
	if err != nil {
		return nvml.PCIInfo{}, err
	}
	return nvml.PCIInfo{BusID: g.BusID, DeviceID: g.DeviceID}, nil
}

func (d *device) Architecture() (nvml.Architecture, error) {
	g, err := d.call("Architecture", 0, -1)
	defer d.m.mu.Unlock()
	if err != nil {
		return nvml.ArchUnknown, err
	}
	return g.Arch, nil
}

func (d *device) MemoryInfo(version int) (nvml.MemoryInfo, error) {
	g, err := d.call("MemoryInfo", version, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.MemoryInfo{}, err
	case version == 1:
		mem := g.Memory
		mem.Reserved = 0
		return mem, nil
	case version == 2:
		return g.Memory, nil
	}
	return nvml.MemoryInfo{}, nvml.CodeArgumentVersionMismatch
}

func (d *device) UtilizationRates() (nvml.Utilization, error) {
	g, err := d.call("UtilizationRates", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.Utilization{}, err
	case g.UtilizationErr != nil:
		return nvml.Utilization{}, g.UtilizationErr
	case g.Utilization == nil || g.MIG != nil && g.MIG.Enabled:
		return nvml.Utilization{}, nvml.CodeNotSupported
	}
	return *g.Utilization, nil
}

func (d *device) Temperature(version int) (int, error) {
	g, err := d.call("Temperature", version, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case version != 1 && version != 2:
		return 0, nvml.CodeArgumentVersionMismatch
	case g.TemperatureErr != nil:
		return 0, g.TemperatureErr
	case g.TemperatureC == nil:
		return 0, nvml.CodeNotSupported
	}
	return *g.TemperatureC, nil
}

func (d *device) NUMANodeID() (int, error) {
	g, err := d.call("NUMANodeID", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case g.MemoryNUMA < 0:
		return 0, nvml.CodeNotSupported
	}
	return g.MemoryNUMA, nil
}

// mask returns the bitmask words of ids, of the size NVML would use.
func mask(ids []int, limit int) []uint64 {
	out := make([]uint64, (limit+63)/64)
	for _, id := range ids {
		if id >= 0 && id < limit {
			out[id/64] |= 1 << (id % 64)
		}
	}
	return out
}

func (d *device) MemoryAffinity(maxNodes int) ([]uint64, error) {
	g, err := d.call("MemoryAffinity", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.NUMANodes == nil:
		return nil, nvml.CodeNotSupported
	}
	return mask(g.NUMANodes, maxNodes), nil
}

func (d *device) CPUAffinity(maxCPUs int) ([]uint64, error) {
	g, err := d.call("CPUAffinity", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.CPUs == nil:
		return nil, nvml.CodeNotSupported
	}
	return mask(g.CPUs, maxCPUs), nil
}

func (d *device) link(method string, l int) (Link, error) {
	g, err := d.call(method, 0, l)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return Link{}, err
	case g.Links == nil:
		return Link{}, nvml.CodeNotSupported
	case l < 0 || l >= len(g.Links):
		return Link{}, nvml.CodeInvalidArgument
	}
	return g.Links[l], nil
}

func (d *device) NVLinkState(l int) (bool, error) {
	ln, err := d.link("NVLinkState", l)
	return ln.Active, err
}

func (d *device) NVLinkRemotePCIInfo(l int) (nvml.PCIInfo, error) {
	ln, err := d.link("NVLinkRemotePCIInfo", l)
	if err == nil && !ln.Active {
		err = nvml.CodeNotSupported
	}
	return nvml.PCIInfo{BusID: ln.RemoteBusID}, err
}

func (d *device) NVLinkRemoteDeviceType(l int) (nvml.NVLinkDeviceType, error) {
	ln, err := d.link("NVLinkRemoteDeviceType", l)
	if err == nil && !ln.Active {
		err = nvml.CodeNotSupported
	}
	return ln.RemoteType, err
}

// peer returns the index of another handle of the same machine.
func (d *device) peer(other nvml.Device) (int, bool) {
	o, ok := other.(*device)
	if !ok || o.m != d.m {
		return 0, false
	}
	return o.i, true
}

func (d *device) TopologyCommonAncestor(other nvml.Device) (nvml.TopologyLevel, error) {
	j, ok := d.peer(other)
	if !ok {
		j = -1
	}
	g, err := d.call("TopologyCommonAncestor", 0, j)
	defer d.m.mu.Unlock()
	if err != nil {
		return 0, err
	}
	lvl, known := g.Ancestor[j]
	if !ok || !known {
		return 0, nvml.CodeInvalidArgument
	}
	return lvl, nil
}

func (d *device) P2PStatus(other nvml.Device, kind nvml.P2PCapability) (nvml.P2PStatus, error) {
	j, ok := d.peer(other)
	if !ok {
		j = -1
	}
	g, err := d.call("P2PStatus", int(kind), j)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.P2PUnknown, err
	case !ok || j == d.i:
		return nvml.P2PUnknown, nvml.CodeInvalidArgument
	}
	if st, ok := g.P2P[j][kind]; ok {
		return st, nil
	}
	return nvml.P2PNotSupported, nil
}

func (d *device) FabricInfo(version int) (nvml.FabricInfo, error) {
	g, err := d.call("FabricInfo", version, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.FabricInfo{}, err
	case g.Fabric == nil:
		return nvml.FabricInfo{}, nvml.CodeNotSupported
	case version < 1 || version > max(g.FabricVersion, 1):
		return nvml.FabricInfo{}, nvml.CodeArgumentVersionMismatch
	}
	f := *g.Fabric
	if version < 2 {
		f.HealthMask = 0
	}
	if version < 3 {
		f.HealthSummary = 0
	}
	return f, nil
}

func (d *device) ComputeProcesses() ([]nvml.Process, error) {
	g, err := d.call("ComputeProcesses", 0, -1)
	defer d.m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return slices.Clone(g.Processes), nil
}
