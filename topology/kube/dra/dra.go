package dra

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// DefaultDriver is the driver name [ResourceSlices] uses when
// Options.Driver is empty.
const DefaultDriver = "gpu.gputopo.io"

// Device type attribute values.
const (
	TypeGPU = "gpu" // a whole accelerator (or an AMD partition device)
	TypeMIG = "mig" // a MIG partition of an NVIDIA GPU
)

// Attribute names (in the driver's domain) published on devices.
const (
	AttrType    resourceapi.QualifiedName = "type"
	AttrIndex   resourceapi.QualifiedName = "index"
	AttrUUID    resourceapi.QualifiedName = "uuid"
	AttrProduct resourceapi.QualifiedName = "productName"
	AttrVendor  resourceapi.QualifiedName = "vendor"
	// AttrPCIeRoot is our PCIe root group ("root-<k>"), the devices whose
	// PCIe paths stay under one host bridge, read from the topology's
	// links. It is published only on devices without a known
	// [StdAttrPCIeRoot], which says the same more precisely.
	AttrPCIeRoot       resourceapi.QualifiedName = "pcieRoot"
	AttrIsland         resourceapi.QualifiedName = "fabricIsland"
	AttrIslandSize     resourceapi.QualifiedName = "fabricIslandSize"
	AttrClique         resourceapi.QualifiedName = "clique"
	AttrPackage        resourceapi.QualifiedName = "package"
	AttrPartitionIndex resourceapi.QualifiedName = "partitionIndex"
	AttrComputeMode    resourceapi.QualifiedName = "computeMode"
	AttrMemoryMode     resourceapi.QualifiedName = "memoryMode"
	AttrMIGCapable     resourceapi.QualifiedName = "migCapable"
	AttrProfile        resourceapi.QualifiedName = "profile"
	AttrProfileID      resourceapi.QualifiedName = "profileID"
	AttrParentIndex    resourceapi.QualifiedName = "parentIndex"
	AttrParentUUID     resourceapi.QualifiedName = "parentUUID"
	AttrPlacementStart resourceapi.QualifiedName = "placementStart"
	AttrPlacementSize  resourceapi.QualifiedName = "placementSize"
)

// Standard attributes (resource.kubernetes.io, as defined by
// k8s.io/dynamic-resource-allocation/deviceattribute). They replace our own
// numaNode and pciBusID, so claims written for any driver's devices match
// ours.
const (
	// StdAttrNUMANode is the device's NUMA node (an int); devices with no
	// NUMA affinity get none.
	StdAttrNUMANode resourceapi.QualifiedName = "resource.kubernetes.io/numaNode"
	// StdAttrPCIeRoot is the PCIe root complex ("pci0000:00") of the
	// device, published where [Options].PCIeRoots knows it.
	StdAttrPCIeRoot resourceapi.QualifiedName = "resource.kubernetes.io/pcieRoot"
	// StdAttrPCIBusID is the PCI address in extended BDF form
	// ("0000:06:00.0"); whole devices with a known address only.
	StdAttrPCIBusID resourceapi.QualifiedName = "resource.kubernetes.io/pciBusID"
)

// Device taint names; the taint key is "<driver>/<name>" (see
// [TaintKey]). Both have the effect NoSchedule: new claims that do not
// tolerate them are not allocated the device, running ones keep it.
const (
	// TaintUnhealthy marks an unhealthy device (and its MIG partitions);
	// the value is the health reason, cut to a label value.
	TaintUnhealthy = "unhealthy"
	// TaintNVLinkDegraded marks a GPU whose NVSwitch links have fewer
	// lanes than the node's other GPUs (or none); the value is
	// "<lanes>-of-<lanes>". Work that stays on one GPU may tolerate it.
	TaintNVLinkDegraded = "nvlink-degraded"
)

// TaintKey returns the key of taint name for driver ("gpu.gputopo.io/unhealthy").
func TaintKey(driver, name string) string { return driver + "/" + name }

// Capacity names published on devices.
const (
	// CapCompute is a shared whole GPU's compute in percent (100 in all),
	// with [CapMemory] the capacity a claim consumes part of when
	// [Options].SharedCapacity is set.
	CapCompute         resourceapi.QualifiedName = "compute"
	CapMemory          resourceapi.QualifiedName = "memory"
	CapMultiprocessors resourceapi.QualifiedName = "multiprocessors"
	CapCopyEngines     resourceapi.QualifiedName = "copyEngines"
	CapDecoders        resourceapi.QualifiedName = "decoders"
	CapEncoders        resourceapi.QualifiedName = "encoders"
	CapJPEGEngines     resourceapi.QualifiedName = "jpegEngines"
	CapOFAEngines      resourceapi.QualifiedName = "ofaEngines"
)

// Counter names in a MIG GPU's counter set. Memory slices are
// "memory-slice-<k>"; per-profile instance limits "instances-<profile>".
const (
	CounterMemory          = "memory"
	CounterMultiprocessors = "multiprocessors"
	CounterCopyEngines     = "copy-engines"
	CounterDecoders        = "decoders"
	CounterEncoders        = "encoders"
	CounterJPEGEngines     = "jpeg-engines"
	CounterOFAEngines      = "ofa-engines"
)

// ErrInvalid is wrapped by every error ResourceSlices and Validate return.
var ErrInvalid = fmt.Errorf("dra: invalid resource slices: %w", topology.ErrInvalidRequest)

// Options tunes [ResourceSlices].
type Options struct {
	// Driver is the DRA driver name (a lower-case DNS subdomain);
	// DefaultDriver when empty.
	Driver string
	// NodeName is the Kubernetes node the devices are on; the topology's
	// name when empty.
	NodeName string
	// Pool is the resource pool's name; NodeName when empty.
	Pool string
	// Generation is the pool generation; bump it on every republish.
	Generation int64
	// Catalog holds the MIG profile tables; mig.DefaultCatalog() when nil.
	Catalog *mig.Catalog
	// WholeGPUsOnly publishes no MIG partition devices (and no counters).
	WholeGPUsOnly bool
	// PCIeRoots maps GPU index to its PCIe root complex ("pci0000:00"),
	// published as [StdAttrPCIeRoot]; the topology does not know it (the
	// node agent reads it from sysfs). Values longer than an attribute
	// holds are left out.
	PCIeRoots map[int]string
	// DeviceTaints publishes unhealthy devices with a [TaintUnhealthy]
	// taint instead of leaving them out, and taints GPUs whose NVLink is
	// degraded ([TaintNVLinkDegraded]). Kubernetes 1.36 or later (the
	// DRADeviceTaints feature, GA in 1.37): an older API server drops the
	// taints and with them the protection, so leave it off there.
	DeviceTaints bool
	// SharedCapacity lets several claims share a whole GPU (KEP-5075,
	// consumable capacity, beta in Kubernetes 1.36): the whole device
	// allows multiple allocations and has two consumable capacities,
	// [CapMemory] (bytes) and [CapCompute] (percent). A claim that asks
	// for neither gets all of both, so the GPU stays exclusive to it; a
	// claim asking for part of the memory (and of the compute) leaves the
	// rest to others. MIG partitions of the GPU still exclude every share
	// of it (the whole device's counters are taken on its first share).
	SharedCapacity bool
}

// CounterSetName returns the name of the counter set of GPU index i.
func CounterSetName(i int) string { return fmt.Sprintf("gpu-%d-counter-set", i) }

// DeviceName returns the name of the whole-device entry of GPU index i.
func DeviceName(i int) string { return fmt.Sprintf("gpu-%d", i) }

// MIGDeviceName returns the name of the MIG partition device of GPU index
// i for profile p at placement start.
func MIGDeviceName(i int, p mig.Profile, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", i, profileLabel(p.Name.String()), p.ID, start)
}

// profileLabel turns "1g.10gb+me" into "1g10gb-me", a DNS-label fragment.
func profileLabel(name string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(name) {
		switch {
		case c == '.':
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// gpuGroup is the devices of one physical accelerator (a whole device and
// its MIG partitions) plus its counter set, if any.
type gpuGroup struct {
	devices  []resourceapi.Device
	counters *resourceapi.CounterSet
}

// ResourceSlices returns the ResourceSlices of one pool describing n's
// healthy accelerators (unhealthy devices are left out, so nothing can be
// allocated on them). Counter-set slices come first, then device slices;
// every slice carries the node name, the pool, the generation and the
// pool's slice count. The result passes [Validate].
func ResourceSlices(n *topology.Node, opts Options) ([]resourceapi.ResourceSlice, error) {
	if n == nil {
		return nil, fmt.Errorf("%w: nil node", ErrInvalid)
	}
	if opts.Driver == "" {
		opts.Driver = DefaultDriver
	}
	if opts.NodeName == "" {
		opts.NodeName = n.Name()
	}
	if opts.Pool == "" {
		opts.Pool = opts.NodeName
	}
	if opts.Catalog == nil {
		opts.Catalog = mig.DefaultCatalog()
	}
	if opts.NodeName == "" {
		return nil, fmt.Errorf("%w: no node name (set Options.NodeName or name the topology)", ErrInvalid)
	}
	roots := pcieRoots(n)
	for i, r := range opts.PCIeRoots {
		if i >= 0 && i < len(roots) && r != "" && fits(r) {
			roots[i] = "" // the standard root says it
		}
	}
	islands := n.Islands()
	degraded := degradedNVLink(n)
	var groups []gpuGroup
	for i := 0; i < n.Len(); i++ {
		d := n.Device(i)
		var taints []resourceapi.DeviceTaint
		if d.Health != topology.Healthy {
			if !opts.DeviceTaints {
				continue
			}
			taints = append(taints, resourceapi.DeviceTaint{Key: TaintKey(opts.Driver, TaintUnhealthy),
				Value: labelValue(d.HealthReason, d.Health.String()), Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
		whole := resourceapi.Device{Name: DeviceName(i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		attrs := whole.Attributes
		attrs[AttrType] = str(TypeGPU)
		common(attrs, n, d, roots, islands, opts.PCIeRoots)
		attrs[AttrIndex] = integer(int64(i))
		if d.ID != "" && fits(d.ID) {
			attrs[AttrUUID] = str(d.ID)
		}
		if d.PCI.IsValid() {
			attrs[StdAttrPCIBusID] = str(d.PCI.String())
		}
		if d.Package != "" && fits(d.Package) {
			attrs[AttrPackage] = str(d.Package)
			attrs[AttrPartitionIndex] = integer(int64(d.Partition.Index))
		}
		if d.Partition.ComputeMode != "" && fits(d.Partition.ComputeMode) {
			attrs[AttrComputeMode] = str(d.Partition.ComputeMode)
		}
		if d.Partition.MemoryMode != "" && fits(d.Partition.MemoryMode) {
			attrs[AttrMemoryMode] = str(d.Partition.MemoryMode)
		}
		if d.Vendor == topology.VendorNVIDIA {
			attrs[AttrMIGCapable] = boolean(d.Partition.Kind == topology.PartitionMIG)
		}
		if d.MemoryBytes > 0 {
			whole.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapMemory: bytesCap(d.MemoryBytes)}
		}
		if opts.SharedCapacity && d.MemoryBytes > 0 {
			share(&whole, d.MemoryBytes)
		}
		g := gpuGroup{devices: []resourceapi.Device{whole}}
		if !opts.WholeGPUsOnly && d.Partition.Kind == topology.PartitionMIG {
			if model, err := opts.Catalog.ForDevice(d); err == nil {
				if err := addMIG(&g, n, d, model, roots, islands, opts.PCIeRoots); err != nil {
					return nil, err
				}
			}
		}
		if len(taints) > 0 {
			for k := range g.devices {
				g.devices[k].Taints = slices.Clone(taints)
			}
		}
		if opts.DeviceTaints && degraded[i] != "" {
			g.devices[0].Taints = append(g.devices[0].Taints, resourceapi.DeviceTaint{Key: TaintKey(opts.Driver, TaintNVLinkDegraded),
				Value: degraded[i], Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
		groups = append(groups, g)
	}
	return assemble(groups, opts)
}

// common sets the attributes a whole device and its partitions share.
func common(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, n *topology.Node, d topology.Device, roots []string, islands [][]int, std map[int]string) {
	if d.Model != "" {
		attrs[AttrProduct] = str(truncate(d.Model))
	}
	if d.Vendor != topology.VendorUnknown {
		attrs[AttrVendor] = str(d.Vendor.String())
	}
	if d.NUMA >= 0 {
		attrs[StdAttrNUMANode] = integer(int64(d.NUMA))
	}
	if r := std[d.Index]; r != "" && fits(r) {
		attrs[StdAttrPCIeRoot] = str(r)
	} else if roots[d.Index] != "" {
		attrs[AttrPCIeRoot] = str(roots[d.Index])
	}
	isl := n.Island(d.Index)
	attrs[AttrIsland] = integer(int64(isl))
	attrs[AttrIslandSize] = integer(int64(len(islands[isl])))
	if f := n.Fabric(); !f.IsZero() {
		attrs[AttrClique] = str(f.String())
	}
}

// addMIG adds the counter set and the partition devices of one MIG GPU,
// and makes the whole device consume every counter.
func addMIG(g *gpuGroup, n *topology.Node, d topology.Device, model *mig.Model, roots []string, islands [][]int, std map[int]string) error {
	profiles := model.Profiles()
	set := resourceapi.CounterSet{Name: CounterSetName(d.Index), Counters: map[string]resourceapi.Counter{}}
	totals, err := engineTotals(model)
	if err != nil {
		return fmt.Errorf("%w: GPU %d (%s): %w", ErrInvalid, d.Index, model.Name(), err)
	}
	for e, spec := range engines {
		if totals[e] > 0 {
			set.Counters[spec.counter] = counter(totals[e], spec.counter == CounterMemory)
		}
	}
	for k := 0; k < model.Slots(); k++ {
		set.Counters[sliceCounter(k)] = counter(1, false)
	}
	for _, p := range profiles {
		if p.MaxInstances < maxDisjoint(p.Placements) {
			set.Counters[instanceCounter(p)] = counter(uint64(p.MaxInstances), false)
		}
	}
	if len(set.Counters) > maxCountersPerCounterSet {
		return fmt.Errorf("%w: GPU %d (%s) needs %d counters, more than the %d a counter set holds",
			ErrInvalid, d.Index, model.Name(), len(set.Counters), maxCountersPerCounterSet)
	}
	// The whole GPU takes everything.
	g.devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: cloneCounters(set.Counters)}}
	for _, p := range profiles {
		for _, pl := range p.Placements {
			dev := resourceapi.Device{Name: MIGDeviceName(d.Index, p, pl.Start),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
				Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
			attrs := dev.Attributes
			attrs[AttrType] = str(TypeMIG)
			common(attrs, n, d, roots, islands, std)
			attrs[AttrParentIndex] = integer(int64(d.Index))
			if d.ID != "" && fits(d.ID) {
				attrs[AttrParentUUID] = str(d.ID)
			}
			attrs[AttrProfile] = str(p.Name.String())
			attrs[AttrProfileID] = integer(int64(p.ID))
			attrs[AttrPlacementStart] = integer(int64(pl.Start))
			attrs[AttrPlacementSize] = integer(int64(pl.Size))
			use := map[string]resourceapi.Counter{}
			for _, e := range engines {
				v := e.get(p)
				if v == 0 {
					continue
				}
				dev.Capacity[e.cap] = resourceapi.DeviceCapacity{Value: counter(v, e.counter == CounterMemory).Value}
				if _, ok := set.Counters[e.counter]; ok {
					use[e.counter] = counter(v, e.counter == CounterMemory)
				}
			}
			for k := pl.Start; k < pl.End(); k++ {
				use[sliceCounter(k)] = counter(1, false)
			}
			if _, ok := set.Counters[instanceCounter(p)]; ok {
				use[instanceCounter(p)] = counter(1, false)
			}
			dev.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: use}}
			g.devices = append(g.devices, dev)
		}
	}
	g.counters = &set
	return nil
}

// engine is one per-profile resource that becomes a capacity of MIG
// devices and a counter of the GPU's set.
type engine struct {
	counter string
	cap     resourceapi.QualifiedName
	get     func(mig.Profile) uint64
}

var engines = []engine{
	{CounterMemory, CapMemory, func(p mig.Profile) uint64 { return p.MemoryMiB << 20 }},
	{CounterMultiprocessors, CapMultiprocessors, func(p mig.Profile) uint64 { return uint64(p.Multiprocessors) }},
	{CounterCopyEngines, CapCopyEngines, func(p mig.Profile) uint64 { return uint64(p.CopyEngines) }},
	{CounterDecoders, CapDecoders, func(p mig.Profile) uint64 { return uint64(p.Decoders) }},
	{CounterEncoders, CapEncoders, func(p mig.Profile) uint64 { return uint64(p.Encoders) }},
	{CounterJPEGEngines, CapJPEGEngines, func(p mig.Profile) uint64 { return uint64(p.JPEGEngines) }},
	{CounterOFAEngines, CapOFAEngines, func(p mig.Profile) uint64 { return uint64(p.OFAEngines) }},
}

// totalsCache memoises engineTotals per model (models are immutable).
var totalsCache sync.Map // *mig.Model -> []uint64

// engineTotals returns, for every engine, the largest total any valid
// layout of the model uses. Those are the counter values: every layout
// package mig accepts fits them, and, with the memory-slice and instance
// counters, nothing else does. (Taking the 7g profile's numbers instead, as
// NVIDIA's driver does, would reject valid layouts of tables where seven
// 1g instances hold more of an engine than one 7g instance.) Valid layouts
// are enumerated exhaustively with mig.Layout as the judge; a GPU has a
// few thousand of them.
func engineTotals(model *mig.Model) ([]uint64, error) {
	if v, ok := totalsCache.Load(model); ok {
		return v.([]uint64), nil
	}
	type cand struct {
		p  mig.Profile
		pl mig.Placement
	}
	var cands []cand
	for _, p := range model.Profiles() {
		for _, pl := range p.Placements {
			cands = append(cands, cand{p, pl})
		}
	}
	layout, err := mig.NewLayout("probe", model)
	if err != nil {
		return nil, err
	}
	best := make([]uint64, len(engines))
	cur := make([]uint64, len(engines))
	var failed error
	var walk func(i int)
	walk = func(i int) {
		for e := range engines {
			best[e] = max(best[e], cur[e])
		}
		for j := i; j < len(cands) && failed == nil; j++ {
			c := cands[j]
			if layout.Add(mig.Instance{Profile: c.p.Name, Placement: c.pl}) != nil {
				continue
			}
			for e, spec := range engines {
				cur[e] += spec.get(c.p)
			}
			walk(j + 1)
			for e, spec := range engines {
				cur[e] -= spec.get(c.p)
			}
			if _, err := layout.Remove(c.pl.Start); err != nil {
				failed = fmt.Errorf("removing the instance just added: %w", err)
			}
		}
	}
	walk(0)
	if failed != nil {
		return nil, failed
	}
	totalsCache.Store(model, best)
	return best, nil
}

func sliceCounter(k int) string { return fmt.Sprintf("memory-slice-%d", k) }

func instanceCounter(p mig.Profile) string {
	return "instances-" + profileLabel(p.Name.String())
}

// maxDisjoint returns how many pairwise disjoint placements the list
// holds (greedy by end, exact for intervals).
func maxDisjoint(pls []mig.Placement) int {
	s := slices.Clone(pls)
	slices.SortFunc(s, func(a, b mig.Placement) int { return a.End() - b.End() })
	count, end := 0, -1
	for _, p := range s {
		if p.Start >= end {
			count++
			end = p.End()
		}
	}
	return count
}

// assemble packs counter sets and device groups into slices within the
// API's limits. A GPU's devices stay in one slice.
func assemble(groups []gpuGroup, opts Options) ([]resourceapi.ResourceSlice, error) {
	var counterSlices [][]resourceapi.CounterSet
	var deviceSlices [][]resourceapi.Device
	var sets []resourceapi.CounterSet
	for _, g := range groups {
		if g.counters != nil {
			sets = append(sets, *g.counters)
		}
	}
	for len(sets) > 0 {
		k := min(len(sets), maxCounterSets)
		counterSlices = append(counterSlices, sets[:k])
		sets = sets[k:]
	}
	var cur []resourceapi.Device
	curAdvanced := false
	for _, g := range groups {
		adv := g.counters != nil || slices.ContainsFunc(g.devices, func(d resourceapi.Device) bool { return len(d.Taints) > 0 })
		limit := func(advanced bool) int {
			if advanced {
				return maxDevicesWithAdvancedFeatures
			}
			return resourceapi.ResourceSliceMaxDevices
		}
		if len(g.devices) > limit(adv) {
			return nil, fmt.Errorf("%w: GPU %s has %d devices, more than the %d a slice holds", ErrInvalid, g.devices[0].Name, len(g.devices), limit(adv))
		}
		if len(cur) > 0 && len(cur)+len(g.devices) > limit(curAdvanced || adv) {
			deviceSlices = append(deviceSlices, cur)
			cur, curAdvanced = nil, false
		}
		cur = append(cur, g.devices...)
		curAdvanced = curAdvanced || adv
	}
	if len(cur) > 0 {
		deviceSlices = append(deviceSlices, cur)
	}
	total := len(counterSlices) + len(deviceSlices)
	if total == 0 {
		// An empty pool is still published, so consumers see the node has
		// no devices rather than an incomplete pool.
		deviceSlices = append(deviceSlices, nil)
		total = 1
	}
	out := make([]resourceapi.ResourceSlice, 0, total)
	mk := func() resourceapi.ResourceSlice {
		node := opts.NodeName
		return resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", opts.NodeName, strings.ReplaceAll(opts.Driver, ".", "-"), len(out))},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   opts.Driver,
				Pool:     resourceapi.ResourcePool{Name: opts.Pool, Generation: opts.Generation, ResourceSliceCount: int64(total)},
				NodeName: &node,
			},
		}
	}
	for _, cs := range counterSlices {
		s := mk()
		s.Spec.SharedCounters = cs
		out = append(out, s)
	}
	for _, ds := range deviceSlices {
		s := mk()
		s.Spec.Devices = ds
		out = append(out, s)
	}
	if err := Validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// pcieRoots groups devices that share a PCIe root complex: a pair whose
// PCIe path (the link's PCIe class under a fabric link) is PIX, PXB or PHB
// does not leave its host bridge. Groups are named "root-<k>", numbered by
// their smallest device; a device with no known PCIe path to any other gets
// "" (no attribute), unless it is alone on the node.
func pcieRoots(n *topology.Node) []string {
	size := n.Len()
	parent := make([]int, size)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	known := make([]bool, size)
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			l := n.Link(i, j)
			class := l.PCIe
			if l.Kind.IsPCIe() {
				class = l.Kind
			}
			if class == topology.LinkNone {
				continue
			}
			known[i], known[j] = true, true
			if class == topology.LinkPIX || class == topology.LinkPXB || class == topology.LinkPHB {
				a, b := find(i), find(j)
				if a != b {
					parent[max(a, b)] = min(a, b)
				}
			}
		}
	}
	out := make([]string, size)
	names := map[int]string{}
	for i := 0; i < size; i++ {
		if !known[i] {
			continue
		}
		r := find(i)
		if _, ok := names[r]; !ok {
			names[r] = fmt.Sprintf("root-%d", len(names))
		}
		out[i] = names[r]
	}
	return out
}

// share makes a whole device multi-allocatable with consumable memory
// and compute: a claim that names neither takes all of both.
func share(dev *resourceapi.Device, memBytes uint64) {
	yes := true
	dev.AllowMultipleAllocations = &yes
	mem := *resource.NewQuantity(int64(memBytes), resource.BinarySI)
	minMem := resource.MustParse("1Mi")
	dev.Capacity[CapMemory] = resourceapi.DeviceCapacity{Value: mem, RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default: new(mem.DeepCopy()), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &minMem}}}
	all, one := resource.MustParse("100"), resource.MustParse("1")
	dev.Capacity[CapCompute] = resourceapi.DeviceCapacity{Value: all, RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default: new(all.DeepCopy()), ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: new(one.DeepCopy()), Max: new(all.DeepCopy()), Step: new(one.DeepCopy())}}}
}

// degradedNVLink returns, per device, the [TaintNVLinkDegraded] value of
// a GPU on an NVSwitch node whose best NVSwitch link has fewer lanes than
// the node's best ("" for the others, and for every GPU of a node without
// NVSwitch: a PCIe workstation or an NVLink bridge pair is not degraded).
func degradedNVLink(n *topology.Node) []string {
	size := n.Len()
	lanes := make([]int, size)
	best := 0
	for i := 0; i < size; i++ {
		for j := 0; j < size; j++ {
			if l := n.Link(i, j); i != j && l.Kind == topology.LinkNVSwitch {
				lanes[i] = max(lanes[i], max(l.Lanes, 1))
			}
		}
		best = max(best, lanes[i])
	}
	out := make([]string, size)
	if best == 0 {
		return out
	}
	for i := range out {
		if lanes[i] < best {
			out[i] = fmt.Sprintf("%d-of-%d", lanes[i], best)
		}
	}
	return out
}

// labelValue cuts s to a Kubernetes label value (at most 63 characters of
// [A-Za-z0-9._-], starting and ending with a letter or digit), with runs
// of other characters as one '-'; fallback when nothing is left.
func labelValue(s, fallback string) string {
	var b []byte
	for i := 0; i < len(s) && len(b) <= 63; i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			c = '-'
		}
		if c == '-' && len(b) > 0 && b[len(b)-1] == '-' {
			continue
		}
		b = append(b, c)
	}
	if len(b) > 63 {
		b = b[:63]
	}
	v := strings.TrimFunc(string(b), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	if v == "" && fallback != s {
		return labelValue(fallback, "")
	}
	return v
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &v} }

func boolean(b bool) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{BoolValue: &b} }

func bytesCap(b uint64) resourceapi.DeviceCapacity {
	return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(b), resource.BinarySI)}
}

func counter(v uint64, binary bool) resourceapi.Counter {
	f := resource.DecimalSI
	if binary {
		f = resource.BinarySI
	}
	return resourceapi.Counter{Value: *resource.NewQuantity(int64(v), f)}
}

func cloneCounters(m map[string]resourceapi.Counter) map[string]resourceapi.Counter {
	out := make(map[string]resourceapi.Counter, len(m))
	for k, v := range m {
		out[k] = resourceapi.Counter{Value: v.Value.DeepCopy()}
	}
	return out
}

func truncate(s string) string {
	if len(s) <= resourceapi.DeviceAttributeMaxValueLength {
		return s
	}
	return strings.ToValidUTF8(s[:resourceapi.DeviceAttributeMaxValueLength], "")
}

// fits reports whether s is short enough for a string attribute.
func fits(s string) bool { return len(s) <= resourceapi.DeviceAttributeMaxValueLength }
