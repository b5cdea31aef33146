package nvidiatest

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// MIG is a fake GPU's MIG state: its mode, its profile table and its live
// instances. The instances change only through NVML calls (or
// Machine.AddInstance), which enforce the hardware rules.
type MIG struct {
	// Enabled and Pending are the current and pending MIG mode.
	Enabled, Pending bool
	// Profiles is the GPU-instance profile table; Info.Index is the NVML
	// profile index each answers at.
	Profiles []MIGProfile
	// InfoVersion is the newest profile-info struct version the driver
	// knows (1..3); version 1 carries no profile name.
	InfoVersion int
	// InstanceMemory is what MemoryInfo answers on the MIG device handles
	// of the live GPU instance whose placement starts at each memory slice
	// (its compute instances share its memory). An instance missing from
	// it answers its profile's memory, all free.
	InstanceMemory map[int]nvml.MemoryInfo
	// InstanceMemoryErr, keyed the same way, is what MemoryInfo answers
	// instead of a value on that instance's MIG device handles (e.g.
	// CodeNotSupported, CodeNoPermission or a failure).
	InstanceMemoryErr map[int]error

	instances []*gpuInstance
	nextGI    int
}

// MIGProfile is one GPU-instance profile of a fake GPU.
type MIGProfile struct {
	// Info is what profile-info calls answer (Name only from version 2).
	Info nvml.GPUInstanceProfileInfo
	// Placements are the legal placements.
	Placements []mig.Placement
}

type gpuInstance struct {
	id        int
	profile   *MIGProfile
	placement mig.Placement
	cis       []*computeInstance
	nextCI    int
	destroyed bool
}

type computeInstance struct {
	info      nvml.ComputeInstanceInfo
	destroyed bool
}

// Instance describes a live GPU instance of a fake GPU.
type Instance struct {
	// ID is the GPU instance id (what Process.GPUInstanceID names).
	ID int
	// ProfileIndex and ProfileID identify its profile.
	ProfileIndex, ProfileID int
	// Placement is where it sits.
	Placement mig.Placement
	// ComputeInstances is the number of live compute instances.
	ComputeInstances int
	// UUIDs are the "MIG-" UUIDs of the live compute instances' MIG
	// devices (what MIGDevice.UUID answers), in creation order.
	UUIDs []string
}

// MIGUUID is the UUID the fake gives the MIG device of compute instance ci
// of GPU instance gi on the GPU with UUID parent: "MIG-" and a UUID-shaped
// hash of the three, deterministic (GPU instance ids are never reused by
// the fake, so a re-created instance gets a new one, as on hardware).
func MIGUUID(parent string, gi, ci int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", parent, gi, ci))
	return fmt.Sprintf("MIG-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// ciIndexBySlices maps a compute-slice count to the NVML compute-instance
// profile index of a full-size compute instance (COMPUTE_INSTANCE_PROFILE_*).
var ciIndexBySlices = map[int]int{1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}

func (g *MIG) profileByID(id int) *MIGProfile {
	for k := range g.Profiles {
		if g.Profiles[k].Info.ID == id {
			return &g.Profiles[k]
		}
	}
	return nil
}

func (g *MIG) live() []*gpuInstance {
	var out []*gpuInstance
	for _, gi := range g.instances {
		if !gi.destroyed {
			out = append(out, gi)
		}
	}
	return out
}

// create enforces the hardware rules of CreateGpuInstanceWithPlacement.
func (g *MIG) create(p *MIGProfile, pl mig.Placement) (*gpuInstance, error) {
	if !g.Enabled {
		return nil, nvml.CodeNotSupported
	}
	if !slices.Contains(p.Placements, pl) {
		return nil, nvml.CodeInvalidArgument
	}
	count := 0
	ofa := 0
	for _, gi := range g.live() {
		if gi.placement.Overlaps(pl) {
			return nil, nvml.CodeInsufficientResources
		}
		if gi.profile.Info.ID == p.Info.ID {
			count++
		}
		ofa += gi.profile.Info.OFAs
	}
	if count >= p.Info.InstanceCount {
		return nil, nvml.CodeInsufficientResources
	}
	// One optical-flow engine per GPU: at most one instance holding it.
	if p.Info.OFAs > 0 && ofa+p.Info.OFAs > g.ofaBudget() {
		return nil, nvml.CodeInsufficientResources
	}
	gi := &gpuInstance{id: g.nextGI, profile: p, placement: pl}
	g.nextGI++
	g.instances = append(g.instances, gi)
	return gi, nil
}

func (g *MIG) ofaBudget() int {
	b := 0
	for _, p := range g.Profiles {
		b = max(b, p.Info.OFAs)
	}
	return b
}

// AddInstance creates a GPU instance of the profile at NVML profile index
// on GPU gpu at the placement, with its full-size compute instance, under
// the same rules as the NVML call. It is for setting up a test's starting
// state and needs no Init.
func (m *Machine) AddInstance(gpu, profileIndex int, pl mig.Placement) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gpu < 0 || gpu >= len(m.GPUs) || m.GPUs[gpu].MIG == nil {
		return fmt.Errorf("GPU %d has no MIG", gpu)
	}
	g := m.GPUs[gpu].MIG
	var p *MIGProfile
	for k := range g.Profiles {
		if g.Profiles[k].Info.Index == profileIndex {
			p = &g.Profiles[k]
		}
	}
	if p == nil {
		return fmt.Errorf("GPU %d has no profile index %d", gpu, profileIndex)
	}
	gi, err := g.create(p, pl)
	if err != nil {
		return err
	}
	_, err = gi.createCI(p.Info.SliceCount)
	return err
}

// Instances returns the live GPU instances of GPU gpu, by placement start.
func (m *Machine) Instances(gpu int) []Instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.GPUs[gpu].MIG
	if g == nil {
		return nil
	}
	var out []Instance
	for _, gi := range g.live() {
		n := 0
		var ids []string
		for _, ci := range gi.cis {
			if !ci.destroyed {
				n++
				ids = append(ids, MIGUUID(m.GPUs[gpu].UUID, gi.id, ci.info.ID))
			}
		}
		out = append(out, Instance{ID: gi.id, ProfileIndex: gi.profile.Info.Index, ProfileID: gi.profile.Info.ID, Placement: gi.placement, ComputeInstances: n, UUIDs: ids})
	}
	slices.SortFunc(out, func(a, b Instance) int { return a.Placement.Start - b.Placement.Start })
	return out
}

func (d *device) MIGMode() (bool, bool, error) {
	g, err := d.call("MIGMode", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return false, false, err
	case g.MIG == nil:
		return false, false, nvml.CodeNotSupported
	}
	return g.MIG.Enabled, g.MIG.Pending, nil
}

func (d *device) GPUInstanceProfileInfo(index, version int) (nvml.GPUInstanceProfileInfo, error) {
	g, err := d.call("GPUInstanceProfileInfo", version, index)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.GPUInstanceProfileInfo{}, err
	case g.MIG == nil:
		return nvml.GPUInstanceProfileInfo{}, nvml.CodeNotSupported
	case index < 0 || index >= 18:
		return nvml.GPUInstanceProfileInfo{}, nvml.CodeInvalidArgument
	case version < 1 || version > max(g.MIG.InfoVersion, 1):
		return nvml.GPUInstanceProfileInfo{}, nvml.CodeArgumentVersionMismatch
	}
	for _, p := range g.MIG.Profiles {
		if p.Info.Index != index {
			continue
		}
		info := p.Info
		switch version {
		case 1:
			info.Name, info.Capabilities = "", 0
		case 2:
			info.Capabilities = 0
		case 3:
			if info.P2P {
				info.Capabilities |= 1
			}
		}
		return info, nil
	}
	return nvml.GPUInstanceProfileInfo{}, nvml.CodeNotSupported
}

func (d *device) GPUInstancePossiblePlacements(profile nvml.GPUInstanceProfileInfo) ([]mig.Placement, error) {
	g, err := d.call("GPUInstancePossiblePlacements", 0, profile.ID)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.MIG == nil:
		return nil, nvml.CodeNotSupported
	}
	p := g.MIG.profileByID(profile.ID)
	if p == nil {
		return nil, nvml.CodeInvalidArgument
	}
	return slices.Clone(p.Placements), nil
}

func (d *device) GPUInstances(profile nvml.GPUInstanceProfileInfo) ([]nvml.GPUInstance, error) {
	g, err := d.call("GPUInstances", 0, profile.ID)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.MIG == nil || !g.MIG.Enabled:
		return nil, nvml.CodeNotSupported
	case g.MIG.profileByID(profile.ID) == nil:
		return nil, nvml.CodeInvalidArgument
	}
	var out []nvml.GPUInstance
	for _, gi := range g.MIG.live() {
		if gi.profile.Info.ID == profile.ID {
			out = append(out, &giHandle{d: d, gi: gi})
		}
	}
	return out, nil
}

func (d *device) CreateGPUInstanceWithPlacement(profile nvml.GPUInstanceProfileInfo, pl mig.Placement) (nvml.GPUInstance, error) {
	g, err := d.call("CreateGPUInstanceWithPlacement", 0, profile.ID)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.MIG == nil:
		return nil, nvml.CodeNotSupported
	}
	p := g.MIG.profileByID(profile.ID)
	if p == nil {
		return nil, nvml.CodeInvalidArgument
	}
	gi, err := g.MIG.create(p, pl)
	if err != nil {
		return nil, err
	}
	return &giHandle{d: d, gi: gi}, nil
}

// giHandle is a GPU-instance handle of a fake GPU.
type giHandle struct {
	d  *device
	gi *gpuInstance
}

var _ nvml.GPUInstance = (*giHandle)(nil)

func (h *giHandle) enter(method string, arg int) error {
	err := h.d.m.enter(Call{GPU: h.d.i, Method: method, Arg: arg})
	if err == nil && h.gi.destroyed {
		err = nvml.CodeInvalidArgument
	}
	return err
}

func (h *giHandle) Info() (nvml.GPUInstanceInfo, error) {
	err := h.enter("GPUInstance.Info", h.gi.id)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return nvml.GPUInstanceInfo{}, err
	}
	return nvml.GPUInstanceInfo{ID: h.gi.id, ProfileID: h.gi.profile.Info.ID, Placement: h.gi.placement}, nil
}

// ciProfile returns the full-size compute-instance profile of gi, the one
// the fake offers (at the NVML index for its slice count).
func (gi *gpuInstance) ciProfile() nvml.ComputeInstanceProfileInfo {
	s := gi.profile.Info.SliceCount
	return nvml.ComputeInstanceProfileInfo{Index: ciIndexBySlices[s], ID: ciIndexBySlices[s], SliceCount: s, InstanceCount: 1, MultiprocessorCount: gi.profile.Info.MultiprocessorCount}
}

func (h *giHandle) ComputeInstanceProfileInfo(index int) (nvml.ComputeInstanceProfileInfo, error) {
	err := h.enter("GPUInstance.ComputeInstanceProfileInfo", index)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return nvml.ComputeInstanceProfileInfo{}, err
	}
	if index < 0 || index >= 9 {
		return nvml.ComputeInstanceProfileInfo{}, nvml.CodeInvalidArgument
	}
	if p := h.gi.ciProfile(); p.Index == index {
		return p, nil
	}
	return nvml.ComputeInstanceProfileInfo{}, nvml.CodeNotSupported
}

func (h *giHandle) ComputeInstances(profile nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, error) {
	err := h.enter("GPUInstance.ComputeInstances", profile.ID)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []nvml.ComputeInstance
	for _, ci := range h.gi.cis {
		if !ci.destroyed && ci.info.ProfileID == profile.ID {
			out = append(out, &ciHandle{gi: h, ci: ci})
		}
	}
	return out, nil
}

// createCI creates a compute instance of the given compute slices on the
// first free run of the GPU instance's compute slices.
func (gi *gpuInstance) createCI(slices int) (*computeInstance, error) {
	used := make([]bool, gi.profile.Info.SliceCount)
	for _, ci := range gi.cis {
		if ci.destroyed {
			continue
		}
		for s := ci.info.Placement.Start; s < ci.info.Placement.End(); s++ {
			used[s] = true
		}
	}
	for start := 0; start+slices <= len(used); start++ {
		free := true
		for s := start; s < start+slices; s++ {
			free = free && !used[s]
		}
		if free {
			p := gi.ciProfile()
			ci := &computeInstance{info: nvml.ComputeInstanceInfo{ID: gi.nextCI, ProfileID: p.ID, Placement: mig.Placement{Start: start, Size: slices}}}
			gi.nextCI++
			gi.cis = append(gi.cis, ci)
			return ci, nil
		}
	}
	return nil, nvml.CodeInsufficientResources
}

func (h *giHandle) CreateComputeInstance(profile nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, error) {
	err := h.enter("GPUInstance.CreateComputeInstance", profile.ID)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if p := h.gi.ciProfile(); profile.ID != p.ID {
		return nil, nvml.CodeInvalidArgument
	}
	ci, err := h.gi.createCI(h.gi.profile.Info.SliceCount)
	if err != nil {
		return nil, err
	}
	return &ciHandle{gi: h, ci: ci}, nil
}

func (h *giHandle) Destroy() error {
	err := h.enter("GPUInstance.Destroy", h.gi.id)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return err
	}
	for _, ci := range h.gi.cis {
		if !ci.destroyed {
			return nvml.CodeInUse
		}
	}
	h.gi.destroyed = true
	return nil
}

// ciHandle is a compute-instance handle of a fake GPU.
type ciHandle struct {
	gi *giHandle
	ci *computeInstance
}

func (h *ciHandle) Info() (nvml.ComputeInstanceInfo, error) {
	err := h.gi.enter("ComputeInstance.Info", h.ci.info.ID)
	defer h.gi.d.m.mu.Unlock()
	if err == nil && h.ci.destroyed {
		err = nvml.CodeInvalidArgument
	}
	if err != nil {
		return nvml.ComputeInstanceInfo{}, err
	}
	return h.ci.info, nil
}

func (h *ciHandle) Destroy() error {
	err := h.gi.enter("ComputeInstance.Destroy", h.ci.info.ID)
	defer h.gi.d.m.mu.Unlock()
	if err == nil && h.ci.destroyed {
		err = nvml.CodeInvalidArgument
	}
	if err != nil {
		return err
	}
	for _, p := range h.gi.d.m.GPUs[h.gi.d.i].Processes {
		if p.GPUInstanceID == h.gi.gi.id {
			return nvml.CodeInUse
		}
	}
	h.ci.destroyed = true
	return nil
}

// MaxMIGDeviceCount answers, as NVML documents, 0 when MIG is off or not
// supported, else the GPU's compute-slice count (the most compute
// instances it can hold).
func (d *device) MaxMIGDeviceCount() (int, error) {
	g, err := d.call("MaxMIGDeviceCount", 0, -1)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return 0, err
	case g.MIG == nil || !g.MIG.Enabled:
		return 0, nil
	}
	return g.MIG.maxMIGDevices(), nil
}

func (g *MIG) maxMIGDevices() int {
	n, live := 0, 0
	for _, p := range g.Profiles {
		n = max(n, p.Info.SliceCount)
	}
	for _, gi := range g.live() {
		for _, ci := range gi.cis {
			if !ci.destroyed {
				live++
			}
		}
	}
	return max(n, live)
}

// MIGDeviceByIndex numbers the live compute instances densely, GPU
// instances in creation order and each one's compute instances in turn;
// an index past them answers not found, one past MaxMIGDeviceCount
// invalid argument.
func (d *device) MIGDeviceByIndex(j int) (nvml.MIGDevice, error) {
	g, err := d.call("MIGDeviceByIndex", 0, j)
	defer d.m.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case g.MIG == nil || !g.MIG.Enabled:
		return nil, nvml.CodeNotSupported
	case j < 0 || j >= g.MIG.maxMIGDevices():
		return nil, nvml.CodeInvalidArgument
	}
	k := 0
	for _, gi := range g.MIG.live() {
		for _, ci := range gi.cis {
			if ci.destroyed {
				continue
			}
			if k == j {
				return &migDevice{d: d, gi: gi, ci: ci}, nil
			}
			k++
		}
	}
	return nil, nvml.CodeNotFound
}

// migDevice is a MIG device handle of a fake GPU: one compute instance.
type migDevice struct {
	d  *device
	gi *gpuInstance
	ci *computeInstance
}

var (
	_ nvml.MIGDevice     = (*migDevice)(nil)
	_ nvml.MIGDeviceUUID = (*migDevice)(nil)
)

// enter enters the machine for a MIG device call (Arg is the GPU instance
// id); a handle whose compute instance is gone answers invalid argument,
// one of a lost GPU GPU-is-lost.
func (h *migDevice) enter(method string, version int) (*GPU, error) {
	g, err := h.d.call(method, version, h.gi.id)
	if err == nil && (h.ci.destroyed || h.gi.destroyed) {
		err = nvml.CodeInvalidArgument
	}
	return g, err
}

func (h *migDevice) GPUInstanceID() (int, error) {
	_, err := h.enter("MIGDevice.GPUInstanceID", 0)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return -1, err
	}
	return h.gi.id, nil
}

// UUID answers MIGUUID of the handle's compute instance.
func (h *migDevice) UUID() (string, error) {
	g, err := h.enter("MIGDevice.UUID", 0)
	defer h.d.m.mu.Unlock()
	if err != nil {
		return "", err
	}
	return MIGUUID(g.UUID, h.gi.id, h.ci.info.ID), nil
}

func (h *migDevice) MemoryInfo(version int) (nvml.MemoryInfo, error) {
	g, err := h.enter("MIGDevice.MemoryInfo", version)
	defer h.d.m.mu.Unlock()
	switch {
	case err != nil:
		return nvml.MemoryInfo{}, err
	case version != 1 && version != 2:
		return nvml.MemoryInfo{}, nvml.CodeArgumentVersionMismatch
	}
	start := h.gi.placement.Start
	if err := g.MIG.InstanceMemoryErr[start]; err != nil {
		return nvml.MemoryInfo{}, err
	}
	mem, ok := g.MIG.InstanceMemory[start]
	if !ok {
		total := h.gi.profile.Info.MemorySizeMB << 20
		mem = nvml.MemoryInfo{Total: total, Free: total}
	}
	if version == 1 {
		mem.Reserved = 0
	}
	return mem, nil
}
