package topology

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Builder assembles and validates a [Node]. Setters record input and never
// fail; [Builder.Build] checks everything at once and reports the problems
// (the first maxReportedProblems of them, then a count of the rest), each
// naming the device or pair at fault.
//
// A Builder holds at most [MaxDevices] devices and maxNICs NICs: further
// AddDevice and AddNIC calls are counted but not stored, and Build then
// fails with an error wrapping [ErrLimit] before allocating anything that
// grows with the device count.
//
// The zero Builder works as [NewBuilder]'s does. A nil *Builder ignores
// its setters (they return nil) and its Build fails with an error
// wrapping [ErrInvalidRequest].
type Builder struct {
	name          string
	lenient       bool
	inferNVSwitch bool
	devices       []Device
	extraDevices  int // AddDevice calls beyond MaxDevices
	links         map[[2]int]Link
	nics          []NIC
	extraNICs     int // AddNIC calls beyond MaxNICs
	nicLinks      map[[2]int]LinkKind
	numa          [][]int
	numaRows      int // rows given to SetNUMADistances (numa is nil when over MaxNUMANodes)
	fabric        FabricDomain
}

// NewBuilder returns an empty strict builder.
func NewBuilder() *Builder {
	return &Builder{links: map[[2]int]Link{}, nicLinks: map[[2]int]LinkKind{}}
}

// initMaps makes a zero Builder's maps, so a Builder{} works as
// NewBuilder's does.
func (b *Builder) initMaps() {
	if b.links == nil {
		b.links = map[[2]int]Link{}
	}
	if b.nicLinks == nil {
		b.nicLinks = map[[2]int]LinkKind{}
	}
}

// SetName sets the node's name.
func (b *Builder) SetName(name string) *Builder {
	if b == nil {
		return nil
	}
	b.name = name
	return b
}

// SetLenient makes Build accept asymmetric links (keeping the weaker
// direction for both) and missing links (as LinkNone, or mirrored from the
// direction that is present), recording a warning for each instead of
// failing. Drivers glitch; a scheduler should degrade, not fail or panic.
func (b *Builder) SetLenient(lenient bool) *Builder {
	if b == nil {
		return nil
	}
	b.lenient = lenient
	return b
}

// SetInferNVSwitch makes Build reclassify NVLink links as NVSwitch links when
// a GPU's NVLink lanes summed over its peers exceed what one GPU of its model
// has (maxNVLinks): nvidia-smi prints "NV18" for every pair of an HGX
// H100, though each GPU has only 18 links, all into the switch fabric.
func (b *Builder) SetInferNVSwitch(infer bool) *Builder {
	if b == nil {
		return nil
	}
	b.inferNVSwitch = infer
	return b
}

// AddDevice adds a device. Device indices must end up being 0..n-1. A
// device beyond the [MaxDevices]th is not stored; Build then fails with an
// error wrapping [ErrLimit].
func (b *Builder) AddDevice(d Device) *Builder {
	if b == nil {
		return nil
	}
	if len(b.devices) >= MaxDevices {
		b.extraDevices++
		return b
	}
	b.devices = append(b.devices, d.clone())
	return b
}

// SetLink records the link in one direction, from device index from to to.
func (b *Builder) SetLink(from, to int, l Link) *Builder {
	if b == nil {
		return nil
	}
	b.initMaps()
	b.links[[2]int{from, to}] = l
	return b
}

// SetLinkPair records the same link in both directions between a and c.
func (b *Builder) SetLinkPair(a, c int, l Link) *Builder {
	if b == nil {
		return nil
	}
	b.initMaps()
	b.links[[2]int{a, c}] = l
	b.links[[2]int{c, a}] = l
	return b
}

// AddNIC adds a NIC; its index is the number of NICs added before it. A NIC
// beyond the maxNICsth is not stored; Build then fails with an error
// wrapping [ErrLimit].
func (b *Builder) AddNIC(nic NIC) *Builder {
	if b == nil {
		return nil
	}
	if len(b.nics) >= maxNICs {
		b.extraNICs++
		return b
	}
	b.nics = append(b.nics, nic)
	return b
}

// SetNICLink records the PCIe path class between device dev and NIC nic.
func (b *Builder) SetNICLink(dev, nic int, kind LinkKind) *Builder {
	if b == nil {
		return nil
	}
	b.initMaps()
	b.nicLinks[[2]int{dev, nic}] = kind
	return b
}

// SetNUMADistances sets the NUMA distance table (SLIT, 10 = local); row i
// is NUMA node i. A table of more than maxNUMANodes rows is not copied;
// Build then fails with an error wrapping [ErrLimit].
func (b *Builder) SetNUMADistances(d [][]int) *Builder {
	if b == nil {
		return nil
	}
	b.numaRows = len(d)
	if d == nil || len(d) > maxNUMANodes {
		b.numa = nil
		return b
	}
	b.numa = make([][]int, len(d))
	for i, r := range d {
		if len(r) > maxNUMANodes {
			r = r[:maxNUMANodes+1] // enough to be reported as ragged
		}
		b.numa[i] = slices.Clone(r)
	}
	return b
}

// SetFabric sets the node's multi-node NVLink domain.
func (b *Builder) SetFabric(f FabricDomain) *Builder {
	if b == nil {
		return nil
	}
	b.fabric = f
	return b
}

// problems collects validation errors and warnings, keeping the first
// maxReportedProblems of each and counting the rest.
type problems struct {
	errs             []error
	omitted          int
	omittedSentinels []error
	warnings         []string
	omittedWarnings  int
}

// room reports whether another error would be kept; when it would not, it
// counts the error as omitted under sentinel. Callers that format a
// costly detail check it first.
func (p *problems) room(sentinel error) bool {
	if len(p.errs) < maxReportedProblems {
		return true
	}
	p.omitted++
	if !slices.Contains(p.omittedSentinels, sentinel) {
		p.omittedSentinels = append(p.omittedSentinels, sentinel)
	}
	return false
}

func (p *problems) add(sentinel error, detail string, devices ...int) {
	if p.room(sentinel) {
		p.errs = append(p.errs, &validationError{Err: sentinel, Devices: devices, Detail: detail})
	}
}

func (p *problems) failed() bool { return len(p.errs) > 0 }

// err joins the kept errors and, when some were omitted, an error saying
// how many (it wraps their sentinels, so errors.Is still sees them).
func (p *problems) err() error {
	errs := p.errs
	if p.omitted > 0 {
		errs = append(errs[:len(errs):len(errs)], &omittedProblems{count: p.omitted, sentinels: p.omittedSentinels})
	}
	return errors.Join(errs...)
}

// warnRoom reports whether another warning would be kept, counting it as
// omitted when not.
func (p *problems) warnRoom() bool {
	if len(p.warnings) < maxReportedProblems {
		return true
	}
	p.omittedWarnings++
	return false
}

func (p *problems) finalWarnings() []string {
	if p.omittedWarnings > 0 {
		return append(p.warnings, fmt.Sprintf("and %d more warnings (only the first %d are kept; see topology limit maxReportedProblems)", p.omittedWarnings, maxReportedProblems))
	}
	return p.warnings
}

// omittedProblems summarises the validation errors beyond
// maxReportedProblems.
type omittedProblems struct {
	count     int
	sentinels []error
}

func (e *omittedProblems) Error() string {
	return fmt.Sprintf("and %d more problems (only the first %d are reported; see topology limit maxReportedProblems)", e.count, maxReportedProblems)
}

func (e *omittedProblems) Unwrap() []error {
	return append(slices.Clip(e.sentinels), ErrInvalidTopology)
}

// checkLimits fails, wrapping ErrLimit, when the builder was given more
// than a node may hold.
func (b *Builder) checkLimits() error {
	if n := len(b.devices) + b.extraDevices; n > MaxDevices {
		return fmt.Errorf("%w: %d devices, more than topology.MaxDevices (%d)", ErrLimit, n, MaxDevices)
	}
	if n := len(b.nics) + b.extraNICs; n > maxNICs {
		return fmt.Errorf("%w: %d NICs, more than topology limit maxNICs (%d)", ErrLimit, n, maxNICs)
	}
	if b.numaRows > maxNUMANodes {
		return fmt.Errorf("%w: NUMA distance table of %d nodes, more than topology limit maxNUMANodes (%d)", ErrLimit, b.numaRows, maxNUMANodes)
	}
	return nil
}

// Build validates the input and returns the node. On failure it returns an
// error joining one error per problem (the first maxReportedProblems, then
// one error counting the rest), each wrapping [ErrInvalidTopology] and
// naming the problem ("missing link", "asymmetric link", "duplicate
// device", ...) and the devices at fault.
// Input beyond a size limit fails first, with an error wrapping [ErrLimit].
//
// Build allocates the n×n link matrix only once the links are known to be
// complete (strict) or repairable (lenient), so a node of many devices and
// no links costs one short error, not n² of anything.
func (b *Builder) Build() (*Node, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: Build on a nil *Builder (use NewBuilder)", ErrInvalidRequest)
	}
	b.initMaps()
	if err := b.checkLimits(); err != nil {
		return nil, err
	}
	var p problems
	devs := b.checkDevices(&p)
	b.checkNUMA(&p, devs)
	if p.failed() {
		return nil, p.err()
	}
	b.checkLinks(&p, len(devs))
	if p.failed() {
		return nil, p.err()
	}
	n := &Node{name: b.name, devices: devs, fabric: b.fabric, numa: b.numa}
	b.buildLinks(&p, n)
	b.buildNICs(&p, n)
	if p.failed() {
		return nil, p.err()
	}
	n.warnings = p.finalWarnings()
	n.computeIslands()
	n.computeFingerprints()
	return n, nil
}

func (b *Builder) checkDevices(p *problems) []Device {
	size := len(b.devices)
	byIndex := make([]*Device, size)
	ids := map[string]int{}
	pcis := map[PCIAddress]int{}
	for i := range b.devices {
		d := &b.devices[i]
		switch {
		case d.Index < 0 || d.Index >= size:
			p.add(ErrInvalidTopology, fmt.Sprintf("index out of range: a node of %d devices numbers them 0..%d", size, size-1), d.Index)
			continue
		case byIndex[d.Index] != nil:
			p.add(errDuplicateDevice, "index used twice", d.Index)
			continue
		}
		byIndex[d.Index] = d
		if d.ID != "" {
			if o, dup := ids[d.ID]; dup {
				p.add(errDuplicateDevice, fmt.Sprintf("ID %q used twice", d.ID), o, d.Index)
			}
			ids[d.ID] = d.Index
		}
		if d.PCI.IsValid() {
			if o, dup := pcis[d.PCI]; dup {
				p.add(errDuplicateDevice, fmt.Sprintf("PCI address %s used twice", d.PCI), o, d.Index)
			}
			pcis[d.PCI] = d.Index
		}
		if d.Health > Unhealthy {
			p.add(ErrInvalidTopology, fmt.Sprintf("unknown health %d", d.Health), d.Index)
		}
		if d.Vendor > VendorOther {
			p.add(ErrInvalidTopology, fmt.Sprintf("unknown vendor %d", d.Vendor), d.Index)
		}
		if d.Partition.Kind > PartitionAMD {
			p.add(ErrInvalidTopology, fmt.Sprintf("unknown partition kind %d", d.Partition.Kind), d.Index)
		}
	}
	out := make([]Device, 0, size)
	for i, d := range byIndex {
		if d == nil {
			if len(p.errs) == 0 {
				p.add(ErrInvalidTopology, "index missing: indices must be 0..n-1", i)
			}
			continue
		}
		out = append(out, d.clone())
	}
	return out
}

func (b *Builder) checkNUMA(p *problems, devs []Device) {
	for i, row := range b.numa {
		if len(row) != len(b.numa) {
			p.add(errInvalidNUMA, fmt.Sprintf("distance table row %d has %d entries, want %d", i, len(row), len(b.numa)))
			continue
		}
		for j, d := range row {
			if d <= 0 || d > 255 {
				p.add(errInvalidNUMA, fmt.Sprintf("distance[%d][%d] = %d, want 1..255", i, j, d))
			} else if d < row[i] {
				p.add(errInvalidNUMA, fmt.Sprintf("distance[%d][%d] = %d is below the local distance %d", i, j, d, row[i]))
			}
		}
	}
	for _, d := range devs {
		switch {
		case d.NUMA < -1 || d.NUMA >= maxNUMANodes:
			p.add(errInvalidNUMA, fmt.Sprintf("NUMA node %d (want -1 for unknown, or 0..%d)", d.NUMA, maxNUMANodes-1), d.Index)
		case b.numa != nil && d.NUMA >= len(b.numa):
			p.add(errInvalidNUMA, fmt.Sprintf("NUMA node %d is not in the %d-node distance table", d.NUMA, len(b.numa)), d.Index)
		}
	}
	for _, nic := range b.nics {
		if nic.NUMA < -1 || nic.NUMA >= maxNUMANodes || (b.numa != nil && nic.NUMA >= len(b.numa)) {
			p.add(errInvalidNUMA, fmt.Sprintf("NIC %q: NUMA node %d", nic.Name, nic.NUMA))
		}
	}
}

// checkLink validates one link's values, reporting to p (when not nil).
func checkLink(p *problems, from, to int, l Link) bool {
	ok := true
	bad := func(sentinel error, detail string) {
		if p != nil {
			p.add(sentinel, detail, from, to)
		}
		ok = false
	}
	if l.Kind > LinkNVSwitch {
		bad(ErrInvalidTopology, fmt.Sprintf("unknown link kind %d", l.Kind))
	}
	if l.PCIe > LinkPIX {
		bad(ErrInvalidTopology, fmt.Sprintf("PCIe path class %s is not a PCIe class", l.PCIe))
	}
	if l.Kind.IsPCIe() && l.PCIe != LinkNone && l.PCIe != l.Kind {
		bad(ErrInvalidTopology, fmt.Sprintf("PCIe path class %s differs from link kind %s", l.PCIe, l.Kind))
	}
	if l.Lanes < 0 || l.Lanes > 1024 {
		bad(ErrInvalidTopology, fmt.Sprintf("lane count %d out of range 0..1024", l.Lanes))
	}
	if l.Lanes > 0 && !l.Kind.IsFabric() {
		bad(ErrInvalidTopology, fmt.Sprintf("%s link with %d lanes: only fabric links have lanes", l.Kind, l.Lanes))
	}
	if math.IsNaN(l.Bandwidth) || math.IsInf(l.Bandwidth, 0) || l.Bandwidth < 0 || l.Bandwidth > 1e6 {
		bad(ErrInvalidTopology, fmt.Sprintf("bandwidth %v GB/s out of range", l.Bandwidth))
	}
	return ok
}

// linkKeyOK reports whether a recorded link names two distinct devices of
// a node of size devices and carries valid values.
func linkKeyOK(k [2]int, l Link, size int) bool {
	return k[0] >= 0 && k[0] < size && k[1] >= 0 && k[1] < size && k[0] != k[1] && checkLink(nil, k[0], k[1], l)
}

// checkLinks validates every recorded link and, for a strict builder, that
// every pair is linked both ways, identically. It allocates nothing that
// grows with the square of the device count: a node of n devices and no
// links costs n²/2 map lookups and one short, capped error.
func (b *Builder) checkLinks(p *problems, size int) {
	clean := true
	for k, l := range b.links {
		if !linkKeyOK(k, l, size) {
			clean = false
			break
		}
	}
	if !clean {
		// Report in a deterministic order.
		keys := make([][2]int, 0, len(b.links))
		for k := range b.links {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y [2]int) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
		for _, k := range keys {
			from, to := k[0], k[1]
			switch {
			case from < 0 || from >= size || to < 0 || to >= size:
				if p.room(errUnknownDevice) {
					p.errs = append(p.errs, &validationError{Err: errUnknownDevice, Devices: []int{from, to},
						Detail: fmt.Sprintf("link %d→%d on a node of %d devices", from, to, size)})
				}
			case from == to:
				p.add(errSelfLink, "a device cannot link to itself", from)
			default:
				checkLink(p, from, to, b.links[k])
			}
		}
		return
	}
	if b.lenient || len(b.links) == size*(size-1) && b.symmetric() {
		return
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			a, fwd := b.link(i, j)
			c, back := b.link(j, i)
			switch {
			case !fwd && !back:
				if p.room(errMissingLink) {
					p.errs = append(p.errs, &validationError{Err: errMissingLink, Devices: []int{i, j}, Detail: "no link in either direction"})
				}
			case fwd != back:
				from, to := j, i
				if !fwd {
					from, to = i, j
				}
				if p.room(errMissingLink) {
					p.errs = append(p.errs, &validationError{Err: errMissingLink, Devices: []int{i, j},
						Detail: fmt.Sprintf("no link %d→%d, though %d→%d is given", from, to, to, from)})
				}
			case a != c:
				if p.room(errAsymmetricLink) {
					p.errs = append(p.errs, &validationError{Err: errAsymmetricLink, Devices: []int{i, j},
						Detail: fmt.Sprintf("%d→%d is %v but %d→%d is %v", i, j, a, j, i, c)})
				}
			}
		}
	}
}

// symmetric reports whether every recorded link has an equal reverse.
func (b *Builder) symmetric() bool {
	for k := range b.links {
		a, _ := b.link(k[0], k[1])
		c, ok := b.link(k[1], k[0])
		if !ok || a != c {
			return false
		}
	}
	return true
}

// link returns the recorded link from→to, its PCIe class normalised.
func (b *Builder) link(from, to int) (Link, bool) {
	l, ok := b.links[[2]int{from, to}]
	if ok && l.Kind.IsPCIe() {
		l.PCIe = l.Kind
	}
	return l, ok
}

// buildLinks fills the link matrix from links checkLinks accepted,
// repairing (lenient) missing and asymmetric pairs with capped warnings.
func (b *Builder) buildLinks(p *problems, n *Node) {
	size := len(n.devices)
	n.links = make([]Link, size*size)
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			a, fwd := b.link(i, j)
			c, back := b.link(j, i)
			switch {
			case !fwd && !back:
				if p.warnRoom() {
					p.warnings = append(p.warnings, fmt.Sprintf("devices %d and %d: no link given; assuming no path", i, j))
				}
			case fwd != back:
				from, to := j, i
				if !fwd {
					from, to = i, j
				}
				if p.warnRoom() {
					p.warnings = append(p.warnings, fmt.Sprintf("devices %d and %d: link %d→%d missing; mirrored from %d→%d", i, j, from, to, to, from))
				}
				if fwd {
					c = a
				} else {
					a = c
				}
			case a != c:
				w := weaker(a, c)
				if p.warnRoom() {
					p.warnings = append(p.warnings, fmt.Sprintf("devices %d and %d: asymmetric link (%v vs %v); kept the weaker %v", i, j, a, c, w))
				}
				a, c = w, w
			}
			n.links[i*size+j], n.links[j*size+i] = a, c
		}
	}
	if b.inferNVSwitch {
		inferNVSwitch(n)
	}
	var est bandwidthCache
	for i := 0; i < size; i++ {
		for j := 0; j < size; j++ {
			l := &n.links[i*size+j]
			if i != j && l.Bandwidth == 0 && l.Kind != LinkNone {
				l.Bandwidth = math.Min(est.get(l.Kind, l.Lanes, n.devices[i].Model), est.get(l.Kind, l.Lanes, n.devices[j].Model))
			}
		}
	}
}

// bandwidthCache remembers a few EstimateBandwidth answers: a node has
// few distinct (kind, lanes, model) triples, and the estimate matches
// model names, which costs more than the rest of a build.
type bandwidthCache struct {
	entries [16]struct {
		kind  LinkKind
		lanes int
		model string
		bw    float64
	}
	n int
}

func (c *bandwidthCache) get(kind LinkKind, lanes int, model string) float64 {
	for i := 0; i < c.n; i++ {
		if e := &c.entries[i]; e.kind == kind && e.lanes == lanes && e.model == model {
			return e.bw
		}
	}
	bw := EstimateBandwidth(kind, lanes, model)
	if c.n < len(c.entries) {
		e := &c.entries[c.n]
		e.kind, e.lanes, e.model, e.bw = kind, lanes, model, bw
		c.n++
	}
	return bw
}

// inferNVSwitch marks NVLink pairs as NVSwitch when either GPU has more
// NVLink lanes across its peers than its model has links.
func inferNVSwitch(n *Node) {
	size := len(n.devices)
	over := make([]bool, size)
	for i := 0; i < size; i++ {
		sum := 0
		for j := 0; j < size; j++ {
			if l := n.links[i*size+j]; l.Kind == LinkNVLink {
				sum += max(l.Lanes, 1)
			}
		}
		over[i] = sum > maxNVLinks(n.devices[i].Model)
	}
	for i := 0; i < size; i++ {
		for j := 0; j < size; j++ {
			if l := &n.links[i*size+j]; l.Kind == LinkNVLink && (over[i] || over[j]) {
				l.Kind = LinkNVSwitch
			}
		}
	}
}

func (b *Builder) buildNICs(p *problems, n *Node) {
	n.nics = slices.Clone(b.nics)
	n.nicLinks = make([]LinkKind, len(n.devices)*len(n.nics))
	names := map[string]bool{}
	for _, nic := range n.nics {
		if nic.Name == "" {
			p.add(ErrInvalidTopology, "a NIC has no name")
		} else if names[nic.Name] {
			p.add(errDuplicateDevice, fmt.Sprintf("NIC name %q used twice", nic.Name))
		}
		names[nic.Name] = true
	}
	for k, kind := range b.nicLinks {
		dev, nic := k[0], k[1]
		switch {
		case dev < 0 || dev >= len(n.devices):
			p.add(errUnknownDevice, fmt.Sprintf("NIC link from device %d on a node of %d devices", dev, len(n.devices)), dev)
		case nic < 0 || nic >= len(n.nics):
			p.add(errUnknownDevice, fmt.Sprintf("NIC link to NIC %d of %d", nic, len(n.nics)), dev)
		case kind != LinkNone && !kind.IsPCIe():
			p.add(ErrInvalidTopology, fmt.Sprintf("NIC %q: link kind %s is not a PCIe path class", n.nics[nic].Name, kind), dev)
		default:
			n.nicLinks[dev*len(n.nics)+nic] = kind
		}
	}
}
