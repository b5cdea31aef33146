package scoring

import (
	"errors"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
	"pgregory.net/rapid"
)

// The oracle recomputes the documented objective by brute force, straight
// from the topology.Node API and the package documentation: every k-subset,
// rings by permutation, look-ahead partitions by recursive enumeration. It
// shares no code with the search except the public types.

type oracle struct {
	node  *topology.Node
	state *State
	req   Request
	w     Weights
	n, k  int
}

func newOracle(node *topology.Node, state *State, req Request) *oracle {
	o := &oracle{node: node, state: state, req: req, n: node.Len(), k: req.Count}
	if req.Shared != nil && o.k == 0 {
		o.k = 1
	}
	o.w = DefaultWeights()
	if req.Weights != nil {
		o.w = *req.Weights
	}
	return o
}

func (o *oracle) usage(i int) DeviceUsage {
	if o.state == nil || i >= len(o.state.Devices) {
		return DeviceUsage{}
	}
	return o.state.Devices[i]
}

func (o *oracle) usable(i int) bool {
	d := o.node.Device(i)
	if d.Health != topology.Healthy || slices.Contains(o.req.Excluded, i) {
		return false
	}
	u := o.usage(i)
	freeMem := int64(d.MemoryBytes) - int64(u.MemoryUsed)
	if s := o.req.Shared; s != nil {
		if u.Allocated || u.ComputeUsed+s.ComputeMilli > 1000 {
			return false
		}
		if s.MemoryBytes > 0 && (d.MemoryBytes == 0 || freeMem < int64(s.MemoryBytes)) {
			return false
		}
	} else if u.Allocated || u.MemoryUsed > 0 || u.ComputeUsed > 0 || u.Shares > 0 {
		return false
	}
	if o.req.MinFreeMemory > 0 && (d.MemoryBytes == 0 || freeMem < int64(o.req.MinFreeMemory)) {
		return false
	}
	return true
}

func (o *oracle) free() []int {
	var f []int
	for i := range o.n {
		if o.usable(i) {
			f = append(f, i)
		}
	}
	return f
}

func gOf(gbs float64) float64 {
	if gbs <= 0 {
		return 0
	}
	return math.Min(math.Log2(1+gbs)/math.Log2(1001), 1)
}

func pcieOf(l topology.Link) float64 {
	k := l.PCIe
	if l.Kind.IsPCIe() {
		k = l.Kind
	}
	if v, ok := map[topology.LinkKind]float64{topology.LinkPIX: 1, topology.LinkPXB: 0.8, topology.LinkPHB: 0.6, topology.LinkNODE: 0.4}[k]; ok {
		return v
	}
	return 0.2 // SYS, and unknown counts as the worst known class
}

// linkOrder orders links for the ring: fabric above PCIe above no path,
// then by bandwidth (GB/s).
func (o *oracle) linkOrder(i, j int) float64 {
	l := o.node.Link(i, j)
	g := 0.0
	switch {
	case l.Kind.IsFabric():
		g = 2
	case l.Kind.IsPCIe():
		g = 1
	}
	return g*1e9 + l.Bandwidth
}

// class is the documented ring class of s.
func (o *oracle) class(s []int) int {
	if len(s) < 2 {
		return 513
	}
	r := o.ringOrder(s)
	g := int(r / 1e9)
	if g == 0 {
		return 0
	}
	bw := r - float64(g)*1e9
	tier := 0
	if bw > 0 {
		tier = min(int(math.Floor(16*math.Log2(1+bw))), 255)
	}
	return 1 + (g-1)*256 + tier
}

// ring is the bandwidth of the best ring's bottleneck.
func (o *oracle) ring(s []int) float64 {
	r := o.ringOrder(s)
	return r - math.Floor(r/1e9)*1e9
}

// ringOrder is the best bottleneck under linkOrder over all Hamiltonian
// cycles (permutations).
func (o *oracle) ringOrder(s []int) float64 {
	if len(s) == 2 {
		return o.linkOrder(s[0], s[1])
	}
	rest := slices.Clone(s[1:])
	best := -1.0
	var perm func(int)
	perm = func(i int) {
		if i == len(rest) {
			b := o.linkOrder(s[0], rest[0])
			for j := 1; j < len(rest); j++ {
				b = math.Min(b, o.linkOrder(rest[j-1], rest[j]))
			}
			best = math.Max(best, math.Min(b, o.linkOrder(rest[len(rest)-1], s[0])))
			return
		}
		for j := i; j < len(rest); j++ {
			rest[i], rest[j] = rest[j], rest[i]
			perm(i + 1)
			rest[i], rest[j] = rest[j], rest[i]
		}
	}
	perm(0)
	return best
}

func (o *oracle) numaKey(i int) string {
	d := o.node.Device(i)
	if d.NUMA >= 0 {
		return "n" + string(rune('0'+d.NUMA))
	}
	if !d.CPUs.IsEmpty() {
		return "c" + d.CPUs.String()
	}
	return "?"
}

// own returns ring, aggregate, numa, pcie of s.
func (o *oracle) own(s []int) [4]float64 {
	k := len(s)
	if k == 1 {
		return [4]float64{1, 1, 1, 1}
	}
	var agg, pc float64
	for _, i := range s {
		for _, j := range s {
			if i == j {
				continue
			}
			l := o.node.Link(i, j)
			if l.Kind == topology.LinkNVSwitch {
				agg += l.Bandwidth / float64(k-1)
			} else {
				agg += l.Bandwidth
			}
			if i < j && l.Kind.IsFabric() {
				pc++ // a fabric pair's traffic takes the fabric: the closest
			} else if i < j {
				pc += pcieOf(l)
			}
		}
	}
	numas := map[string]bool{}
	for _, i := range s {
		if key := o.numaKey(i); key != "?" { // unknown NUMA adds no node
			numas[key] = true
		}
	}
	return [4]float64{gOf(o.ring(s)), gOf(agg / float64(k)), 1 / float64(max(len(numas), 1)), pc / float64(k*(k-1)/2)}
}

func (o *oracle) unit(s []int) float64 {
	c := o.own(s)
	w := o.w
	wu := w.Ring + w.Aggregate + w.NUMA + w.PCIe
	if wu == 0 {
		return 1
	}
	return (w.Ring*c[0] + w.Aggregate*c[1] + w.NUMA*c[2] + w.PCIe*c[3]) / wu
}

// partition is P_L(r) by enumerating every partition.
func (o *oracle) partition(r []int, L int) float64 {
	if len(r) < L {
		return math.Inf(1)
	}
	leftover := len(r) % L
	best := math.Inf(-1)
	var rec func(rest []int, left int, worst float64)
	rec = func(rest []int, left int, worst float64) {
		if len(rest) == 0 {
			best = math.Max(best, worst)
			return
		}
		first := rest[0]
		if left > 0 {
			rec(rest[1:], left-1, worst)
		}
		others := rest[1:]
		// Groups holding first: choose L-1 of others.
		var choose func(start int, g []int)
		choose = func(start int, g []int) {
			if len(g) == L {
				var remain []int
				for _, x := range rest {
					if !slices.Contains(g, x) {
						remain = append(remain, x)
					}
				}
				rec(remain, left, math.Min(worst, o.unit(g)))
				return
			}
			for j := start; j < len(others); j++ {
				choose(j+1, append(slices.Clone(g), others[j]))
			}
		}
		choose(0, []int{first})
	}
	rec(r, leftover, math.Inf(1))
	return best
}

func (o *oracle) scopeKey(kind Scope, i int) string {
	d := o.node.Device(i)
	switch kind {
	case ScopeFabric:
		return string(rune('a' + o.node.Island(i)))
	case ScopeNUMA:
		return o.numaKey(i)
	case ScopePackage:
		if d.Package == "" {
			return "solo" + string(rune('a'+i))
		}
		return d.Package
	case ScopePCIe:
		// Connected component of PIX/PXB paths.
		seen := map[int]bool{i: true}
		stack := []int{i}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for y := range o.n {
				if !seen[y] && y != x && pcieOf(o.node.Link(x, y)) >= 0.8 {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		low := o.n
		for x := range seen {
			low = min(low, x)
		}
		return string(rune('a' + low))
	}
	return ""
}

func (o *oracle) sameScope(kind Scope, s []int) bool {
	for _, i := range s {
		if o.scopeKey(kind, i) != o.scopeKey(kind, s[0]) {
			return false
		}
	}
	return true
}

// packing is the documented best-fit term.
func (o *oracle) packing(s []int, free []int) (float64, bool) {
	sum, kinds := 0.0, 0
	for _, kind := range []Scope{ScopeFabric, ScopePCIe, ScopeNUMA, ScopePackage} {
		sizes := map[string]int{}
		for i := range o.n {
			sizes[o.scopeKey(kind, i)]++
		}
		useful := false
		for _, c := range sizes {
			if c >= 2 {
				useful = true
			}
		}
		if !useful {
			continue
		}
		touched := map[string]bool{}
		for _, i := range s {
			touched[o.scopeKey(kind, i)] = true
		}
		freeIn := 0
		for _, i := range free {
			if touched[o.scopeKey(kind, i)] {
				freeIn++
			}
		}
		sum += float64(len(s)) / float64(freeIn)
		kinds++
	}
	if kinds == 0 {
		return 1, false
	}
	return sum / float64(kinds), true
}

func (o *oracle) affinity(i int) float64 {
	a := o.req.Affinity
	sum, parts := 0.0, 0
	if len(a.NUMA) > 0 {
		parts++
		if slices.Contains(a.NUMA, o.node.Device(i).NUMA) {
			sum++
		}
	}
	if len(a.NICs) > 0 {
		parts++
		best := 0.0
		for _, nic := range a.NICs {
			best = math.Max(best, pcieOf(topology.Link{Kind: o.node.NICLink(i, nic)}))
		}
		sum += best
	}
	return sum / float64(parts)
}

func (o *oracle) fit(i int) float64 {
	d := o.node.Device(i)
	u := o.usage(i)
	s := o.req.Shared
	if d.MemoryBytes > 0 && s.MemoryBytes > 0 && u.MemoryUsed+s.MemoryBytes <= d.MemoryBytes {
		return 1 - float64(d.MemoryBytes-u.MemoryUsed-s.MemoryBytes)/float64(d.MemoryBytes)
	}
	return 1 - float64(max(1000-u.ComputeUsed-s.ComputeMilli, 0))/1000
}

// fgdFragment is Σ_m p_m·F_n(m) by fgd.TaskFragment, after the share is put
// on each device of placed; each device's free capacity is oracleFreeMilli
// (memory included).
func (o *oracle) fgdFragment(placed []int) float64 {
	node := fgd.Node{CPUMilli: math.MaxInt64, MemoryBytes: math.MaxInt64, Model: o.node.Device(0).Model}
	for i := range o.n {
		u := o.usage(i)
		if slices.Contains(placed, i) {
			u.ComputeUsed += o.req.Shared.ComputeMilli
			u.MemoryUsed += o.req.Shared.MemoryBytes
		}
		f := int64(0)
		if !u.Allocated && o.node.Device(i).Health == topology.Healthy {
			f = oracleFreeMilli(o.node.Device(i).MemoryBytes, u)
		}
		node.GPUMilli = append(node.GPUMilli, f)
	}
	sum := 0.0
	for _, task := range o.req.Workload.Tasks() {
		fr, err := fgd.TaskFragment(node, task)
		if err != nil {
			panic(err)
		}
		sum += task.Weight * float64(fr)
	}
	return sum
}

// oracleFreeMilli is the documented free capacity of a healthy device not
// allocated whole, in milli-GPU: the smaller of its free compute and its
// free memory's share of capacity (rounded down; compute alone when the
// capacity is unknown), computed with big integers.
func oracleFreeMilli(capacity uint64, u DeviceUsage) int64 {
	f := int64(max(1000-u.ComputeUsed, 0))
	if capacity == 0 || u.MemoryUsed == 0 {
		return f
	}
	if u.MemoryUsed >= capacity {
		return 0
	}
	num := new(big.Int).Mul(new(big.Int).SetUint64(capacity-u.MemoryUsed), big.NewInt(1000))
	return min(f, num.Quo(num, new(big.Int).SetUint64(capacity)).Int64())
}

// candidateOK applies the hard constraints (a).
func (o *oracle) candidateOK(s []int) bool {
	for _, r := range o.req.Required {
		if !slices.Contains(s, r) {
			return false
		}
	}
	if o.req.Scope != ScopeNone && o.req.ScopeMode == ModeRequired && !o.sameScope(o.req.Scope, s) {
		return false
	}
	var table [][]int
	for _, a := range o.req.AllowedSets {
		if len(a) == o.k {
			table = append(table, a)
		}
	}
	if table != nil {
		ok := false
		for _, a := range table {
			b := slices.Sorted(slices.Values(a))
			if slices.Equal(b, s) {
				ok = true
			}
		}
		return ok
	}
	return true
}

// score is the documented objective of candidate s.
// oEval is a candidate's place in the documented order.
type oEval struct {
	class int     // ring class
	own   float64 // affinity and preferred scope, weighted mean (0 when inactive)
	lanes float64 // fabric lanes over the pairs (0 when the Aggregate weight is 0)
	pairs float64 // same-NUMA pairs (0 when the NUMA weight is 0)
	pcie  float64 // summed PCIe closeness of the pairs (0 when the PCIe weight is 0)
	score float64 // weighted mean of all components
	lex   bool    // request first
}

// atLeast reports whether a is at least as good as b, up to the
// tolerances of floating point (affinity levels within 1e-9 straddling a
// quantisation step of 2^-20 count as equal).
func atLeast(a, b oEval) bool {
	if a.lex {
		if a.class != b.class {
			return a.class > b.class
		}
		if math.Abs(a.own-b.own) >= 1e-9 {
			if qa, qb := math.Floor(a.own*(1<<20)+0.5), math.Floor(b.own*(1<<20)+0.5); qa != qb {
				return qa > qb
			}
		}
		for _, l := range [][2]float64{{a.lanes, b.lanes}, {a.pairs, b.pairs}, {a.pcie, b.pcie}} {
			if math.Abs(l[0]-l[1]) > 1e-9 {
				return l[0] > l[1]
			}
		}
	}
	return a.score >= b.score-tol
}

// levels returns s's fabric lanes (max(Lanes, 1) per fabric pair),
// same-NUMA pairs (a known locality group shared) and summed PCIe
// closeness (5 for a fabric pair, else PIX 5 ... SYS or unknown 1).
func (o *oracle) levels(s []int) (lanes, pairs, pcie float64) {
	for a, i := range s {
		for _, j := range s[a+1:] {
			l := o.node.Link(i, j)
			if l.Kind.IsFabric() {
				lanes += float64(max(l.Lanes, 1))
				pcie += 5
			} else {
				pcie += 5 * pcieOf(l)
			}
			if ki := o.numaKey(i); ki != "?" && ki == o.numaKey(j) {
				pairs++
			}
		}
	}
	return lanes, pairs, pcie
}

// eval places s in the documented order.
func (o *oracle) eval(s []int, free []int) oEval {
	w := o.w
	var num, den float64
	if len(o.req.Affinity.NUMA) > 0 || len(o.req.Affinity.NICs) > 0 {
		a := 0.0
		for _, i := range s {
			a += o.affinity(i)
		}
		num += w.Affinity * a / float64(len(s))
		den += w.Affinity
	}
	if o.req.Scope != ScopeNone && o.req.ScopeMode == ModePreferred {
		if o.sameScope(o.req.Scope, s) {
			num += w.Scope
		}
		den += w.Scope
	}
	e := oEval{class: o.class(s), score: o.score(s, free), lex: !w.Trade && w.Ring > 0}
	if den > 0 {
		e.own = num / den
	}
	lanes, pairs, pcie := o.levels(s)
	if w.Aggregate > 0 {
		e.lanes = lanes
	}
	if w.NUMA > 0 {
		e.pairs = pairs
	}
	if w.PCIe > 0 {
		e.pcie = pcie
	}
	return e
}

func (o *oracle) score(s []int, free []int) float64 {
	w := o.w
	shared := o.req.Shared != nil
	u := o.unit(s)
	wu := w.Ring + w.Aggregate + w.NUMA + w.PCIe
	num, den := wu*u, wu
	L := max(o.k, 2)
	if !shared && L <= o.n {
		var rest []int
		for _, i := range free {
			if !slices.Contains(s, i) {
				rest = append(rest, i)
			}
		}
		la := math.Min(u, o.partition(rest, L))
		num += w.LookAhead * la
		den += w.LookAhead
	}
	if p, ok := o.packing(s, free); ok {
		num += w.Packing * p
		den += w.Packing
	}
	if len(o.req.Affinity.NUMA) > 0 || len(o.req.Affinity.NICs) > 0 {
		a := 0.0
		for _, i := range s {
			a += o.affinity(i)
		}
		num += w.Affinity * a / float64(len(s))
		den += w.Affinity
	}
	if o.req.Scope != ScopeNone && o.req.ScopeMode == ModePreferred {
		v := 0.0
		if o.sameScope(o.req.Scope, s) {
			v = 1
		}
		num += w.Scope * v
		den += w.Scope
	}
	if shared {
		f := 0.0
		for _, i := range s {
			f += o.fit(i)
		}
		num += w.Fit * f / float64(len(s))
		den += w.Fit
		if o.req.Workload != nil && w.Fragmentation > 0 {
			before := o.fgdFragment(nil)
			after := o.fgdFragment(s)
			num += w.Fragmentation / (1 + math.Exp((after-before)/1000))
			den += w.Fragmentation
		}
	}
	if den == 0 {
		return 1
	}
	return num / den
}

// best returns the best candidate and every candidate's evaluation.
func (o *oracle) best() (best oEval, n int, scores map[string]oEval) {
	free := o.free()
	scores = map[string]oEval{}
	var rec func(start int, s []int)
	rec = func(start int, s []int) {
		if len(s) == o.k {
			if o.candidateOK(s) {
				e := o.eval(s, free)
				scores[NewDeviceSet(s...).String()] = e
				if n == 0 || !atLeast(best, e) {
					best = e
				}
				n++
			}
			return
		}
		for j := start; j < len(free); j++ {
			rec(j+1, append(slices.Clone(s), free[j]))
		}
	}
	rec(0, nil)
	return best, n, scores
}

// --- random inputs ---

var kinds = []topology.LinkKind{topology.LinkNone, topology.LinkSYS, topology.LinkNODE, topology.LinkPHB,
	topology.LinkPXB, topology.LinkPIX, topology.LinkXGMI, topology.LinkNVLink, topology.LinkNVSwitch}

func genNode(t *rapid.T, maxN int) *topology.Node {
	n := rapid.IntRange(1, maxN).Draw(t, "n")
	b := topology.NewBuilder().SetName("random")
	models := []string{"NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-16GB", "AMD Instinct MI300X", ""}
	model := rapid.SampledFrom(models).Draw(t, "model")
	for i := range n {
		d := topology.Device{Index: i, Model: model, NUMA: rapid.IntRange(-1, 2).Draw(t, "numa")}
		d.MemoryBytes = rapid.SampledFrom([]uint64{0, 16 << 30, 80 << 30}).Draw(t, "mem")
		if rapid.IntRange(0, 14).Draw(t, "unhealthy") == 0 {
			d.Health = topology.Unhealthy
		}
		if rapid.Bool().Draw(t, "pkg") {
			d.Package = rapid.SampledFrom([]string{"p0", "p1", "p2"}).Draw(t, "pkgname")
		}
		b.AddDevice(d)
	}
	nics := rapid.IntRange(0, 2).Draw(t, "nics")
	for x := range nics {
		b.AddNIC(topology.NIC{Name: "NIC" + string(rune('0'+x)), NUMA: -1})
		for i := range n {
			b.SetNICLink(i, x, kinds[rapid.IntRange(0, 5).Draw(t, "niclink")])
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			k := rapid.SampledFrom(kinds).Draw(t, "kind")
			l := topology.Link{Kind: k}
			if k.IsFabric() {
				l.Lanes = rapid.IntRange(1, 18).Draw(t, "lanes")
				l.PCIe = kinds[rapid.IntRange(0, 5).Draw(t, "pcie")]
			}
			if k != topology.LinkNone && rapid.IntRange(0, 3).Draw(t, "explicitbw") == 0 {
				l.Bandwidth = float64(rapid.IntRange(1, 900).Draw(t, "bw"))
			}
			b.SetLinkPair(i, j, l)
		}
	}
	node, err := b.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return node
}

func genState(t *rapid.T, n int) *State {
	if rapid.IntRange(0, 4).Draw(t, "nilstate") == 0 {
		return nil
	}
	s := &State{Devices: make([]DeviceUsage, rapid.IntRange(0, n).Draw(t, "statelen"))}
	for i := range s.Devices {
		switch rapid.IntRange(0, 9).Draw(t, "use") {
		case 0:
			s.Devices[i].Allocated = true
		case 1:
			s.Devices[i] = DeviceUsage{MemoryUsed: uint64(rapid.IntRange(0, 80).Draw(t, "memused")) << 30,
				ComputeUsed: rapid.IntRange(0, 1000).Draw(t, "cu"), Shares: rapid.IntRange(1, 3).Draw(t, "slices")}
		}
	}
	return s
}

func genRequest(t *rapid.T, node *topology.Node, state *State) Request {
	n := node.Len()
	idle := 0
	for i := range n {
		if node.Device(i).Health == topology.Healthy && !state.Usage(i).InUse() {
			idle++
		}
	}
	r := Request{Count: rapid.IntRange(1, max(idle, 1)).Draw(t, "count")}
	if rapid.IntRange(0, 5).Draw(t, "shared") == 0 {
		r.Shared = &Share{MemoryBytes: uint64(rapid.IntRange(0, 40).Draw(t, "slicemem")) << 30,
			ComputeMilli: rapid.IntRange(1, 1000).Draw(t, "slicecu")}
		r.Count = rapid.IntRange(0, min(n, 3)).Draw(t, "sharedcount")
		if rapid.Bool().Draw(t, "workload") {
			r.Workload = testWorkload
		}
	}
	perm := rapid.Permutation(seq(n)).Draw(t, "perm")
	nReq := rapid.IntRange(0, min(2, max(r.Count, 1))).Draw(t, "nreq")
	r.Required = perm[:nReq]
	nExc := rapid.IntRange(0, min(2, n-nReq)).Draw(t, "nexc")
	r.Excluded = perm[nReq : nReq+nExc]
	if rapid.IntRange(0, 9).Draw(t, "minmem") == 0 {
		r.MinFreeMemory = 20 << 30
	}
	if rapid.IntRange(0, 4).Draw(t, "aff") == 0 {
		r.Affinity.NUMA = []int{rapid.IntRange(0, 2).Draw(t, "affnuma")}
	}
	if nics := len(node.NICs()); nics > 0 && rapid.IntRange(0, 4).Draw(t, "affnic") == 0 {
		r.Affinity.NICs = []int{rapid.IntRange(0, nics-1).Draw(t, "nic")}
	}
	r.Scope = Scope(rapid.IntRange(0, 4).Draw(t, "scope"))
	r.ScopeMode = ModePreferred
	if rapid.IntRange(0, 3).Draw(t, "scopemode") == 0 {
		r.ScopeMode = ModeRequired
	}
	if rapid.IntRange(0, 5).Draw(t, "table") == 0 {
		for range rapid.IntRange(1, 4).Draw(t, "tablelen") {
			p := rapid.Permutation(seq(n)).Draw(t, "tperm")
			r.AllowedSets = append(r.AllowedSets, p[:rapid.IntRange(1, n).Draw(t, "tsize")])
		}
	}
	if rapid.IntRange(0, 3).Draw(t, "weights") == 0 {
		w := Weights{}
		for _, f := range []*float64{&w.Ring, &w.Aggregate, &w.NUMA, &w.PCIe, &w.LookAhead, &w.Packing, &w.Affinity, &w.Scope, &w.Fit, &w.Fragmentation} {
			*f = float64(rapid.IntRange(0, 100).Draw(t, "w"))
		}
		w.Ring++
		w.Trade = rapid.Bool().Draw(t, "trade")
		r.Weights = &w
	}
	return r
}

// testWorkload mixes CPU-only, shared and whole-GPU task shapes.
var testWorkload = func() *fgd.Workload {
	w, err := fgd.NewWorkload([]fgd.Task{
		{CPUMilli: 4000, Weight: 1},
		{CPUMilli: 8000, GPUMilli: 250, GPUs: 1, Weight: 3},
		{CPUMilli: 8000, GPUMilli: 500, GPUs: 1, Weight: 2},
		{CPUMilli: 16000, GPUMilli: 1000, GPUs: 1, Weight: 2},
		{CPUMilli: 32000, GPUMilli: 1000, GPUs: 2, Weight: 1},
	})
	if err != nil {
		panic(err)
	}
	return w
}()

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// permuteNode relabels node's devices: new index pi[i] for old index i.
func permuteNode(t interface{ Fatalf(string, ...any) }, node *topology.Node, pi []int) *topology.Node {
	n := node.Len()
	b := topology.NewBuilder().SetName(node.Name())
	devs := make([]topology.Device, n)
	for i := range n {
		d := node.Device(i)
		d.Index = pi[i]
		devs[pi[i]] = d
	}
	for _, d := range devs {
		b.AddDevice(d)
	}
	for _, nic := range node.NICs() {
		b.AddNIC(nic)
	}
	for x := range node.NICs() {
		for i := range n {
			b.SetNICLink(pi[i], x, node.NICLink(i, x))
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			b.SetLinkPair(pi[i], pi[j], node.Link(i, j))
		}
	}
	p, err := b.Build()
	if err != nil {
		t.Fatalf("permute: %v", err)
	}
	return p
}

func mapAll(pi, s []int) []int {
	out := make([]int, len(s))
	for i, x := range s {
		out[i] = pi[x]
	}
	return out
}

func permuteState(s *State, pi []int, n int) *State {
	if s == nil {
		return nil
	}
	out := NewState(n)
	for i, u := range s.Devices {
		out.Devices[pi[i]] = u
	}
	return out
}

func permuteRequest(r Request, pi []int) Request {
	p := r
	p.Required = mapAll(pi, r.Required)
	p.Excluded = mapAll(pi, r.Excluded)
	p.AllowedSets = nil
	for _, a := range r.AllowedSets {
		p.AllowedSets = append(p.AllowedSets, mapAll(pi, a))
	}
	return p
}

const tol = 1e-9

func TestSelectDevicesMatchesOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 10)
		state := genState(t, node.Len())
		req := genRequest(t, node, state)
		o := newOracle(node, state, req)
		best, ncand, scores := o.best()

		res, err := SelectDevices(node, state, req)
		free := o.free()
		if ncand == 0 {
			if err == nil {
				t.Fatalf("oracle has no candidate, SelectDevices chose %v", res.Set)
			}
			reqFree := true
			for _, r := range req.Required {
				reqFree = reqFree && slices.Contains(free, r)
			}
			switch {
			case len(req.Required) > o.k:
				wantErr(t, err, ErrInvalidRequest)
			case !reqFree:
				wantErr(t, err, ErrRequiredUnavailable)
			case len(free) < o.k:
				wantErr(t, err, ErrInsufficientDevices)
			default:
				wantErr(t, err, ErrUnsatisfiable)
			}
			return
		}
		if err != nil {
			t.Fatalf("oracle has %d candidates (best %+v), SelectDevices: %v", ncand, best, err)
		}
		got := res.Devices()
		if len(got) != o.k {
			t.Fatalf("chose %v, want %d devices", got, o.k)
		}
		for _, i := range got {
			if !o.usable(i) {
				t.Fatalf("chose unusable device %d (busy, unhealthy, excluded or short of memory)", i)
			}
		}
		if !o.candidateOK(got) {
			t.Fatalf("chose %v, which breaks a hard constraint", got)
		}
		mine := scores[res.Set.String()]
		if math.Abs(mine.score-res.Score) > tol {
			t.Fatalf("reported score %.12f, oracle scores %v at %.12f", res.Score, res.Set, mine.score)
		}
		if !atLeast(mine, best) {
			t.Fatalf("chose %v %+v, the optimum is %+v", res.Set, mine, best)
		}
		if !res.Exact {
			t.Fatalf("small node result not marked exact")
		}
		// Deterministic, and the explanation changes nothing.
		again, err := SelectDevices(node, state, req, WithExplanation())
		if err != nil || again.Set != res.Set || again.Score != res.Score {
			t.Fatalf("second call gave %v %v (err %v), first %v %v", again.Set, again.Score, err, res.Set, res.Score)
		}
		checkExplanation(t, again, scores)
		// Invariant under relabelling.
		pi := rapid.Permutation(seq(node.Len())).Draw(t, "relabel")
		pnode := permuteNode(t, node, pi)
		pres, err := SelectDevices(pnode, permuteState(state, pi, node.Len()), permuteRequest(req, pi))
		if err != nil {
			t.Fatalf("relabelled: %v", err)
		}
		if math.Abs(pres.Score-res.Score) > tol {
			t.Fatalf("relabelled score %.12f, original %.12f", pres.Score, res.Score)
		}
		inv := make([]int, len(pi))
		for i, p := range pi {
			inv[p] = i
		}
		back := slices.Sorted(slices.Values(mapAll(inv, pres.Devices())))
		if sc, ok := scores[NewDeviceSet(back...).String()]; !ok || !atLeast(sc, best) {
			t.Fatalf("relabelled choice maps back to %v (%+v, known %v), optimum %+v", back, sc, ok, best)
		}
	})
}

func checkExplanation(t *rapid.T, r Result, scores map[string]oEval) {
	num, den := 0.0, 0.0
	for _, c := range r.Components {
		if c.Value < -tol || c.Value > 1+tol {
			t.Fatalf("component %s = %v outside [0,1]", c.Name, c.Value)
		}
		num += c.Weight * c.Value
		den += c.Weight
	}
	if den > 0 && math.Abs(num/den-r.Score) > 1e-9 {
		t.Fatalf("components average to %.12f, score %.12f: %v", num/den, r.Score, r.Components)
	}
	if ru := r.RunnerUp; ru != nil {
		win, rue := scores[r.Set.String()], scores[ru.Set.String()]
		if ru.Set == r.Set || !atLeast(win, rue) {
			t.Fatalf("runner-up %v %+v vs winner %v %+v", ru.Set, rue, r.Set, win)
		}
		if sc, ok := scores[ru.Set.String()]; !ok || math.Abs(sc.score-ru.Score) > tol {
			t.Fatalf("runner-up %v score %.12f, oracle %v (%v)", ru.Set, ru.Score, sc, ok)
		}
		var second oEval
		found := false
		for s, sc := range scores {
			if s != r.Set.String() && (!found || !atLeast(second, sc)) {
				second, found = sc, true
			}
		}
		if !atLeast(rue, second) {
			t.Fatalf("runner-up %+v, the second best is %+v", rue, second)
		}
	} else if len(scores) > 1 {
		t.Fatalf("no runner-up among %d candidates", len(scores))
	}
}

func wantErr(t *rapid.T, err, sentinel error) {
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
}

// TestRequestFirstRing: on random graphs under default weights, no other
// candidate has a strictly better ring bottleneck than the answer: none has
// a higher ring class, and none whose bottleneck is in the same link group
// (fabric, PCIe, no path) has one more than 1/16 octave (4.4%, the
// documented tolerance) stronger.
func TestRequestFirstRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 9)
		state := genState(t, node.Len())
		req := genRequest(t, node, state)
		req.Weights = nil
		o := newOracle(node, state, req)
		_, ncand, scores := o.best()
		res, err := SelectDevices(node, state, req)
		if ncand == 0 {
			if err == nil {
				t.Fatalf("no candidate, chose %v", res.Set)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got := res.Devices()
		mine := scores[res.Set.String()]
		for key, e := range scores {
			if e.class > mine.class {
				t.Fatalf("chose %v (ring class %d), %s has ring class %d", got, mine.class, key, e.class)
			}
		}
		if len(got) < 2 {
			return
		}
		gotRing := o.ringOrder(got)
		var rec func(start int, s []int)
		free := o.free()
		rec = func(start int, s []int) {
			if len(s) == o.k {
				if !o.candidateOK(s) {
					return
				}
				r := o.ringOrder(s)
				if math.Floor(r/1e9) == math.Floor(gotRing/1e9) && r-gotRing > 0 &&
					math.Log2(1+o.ring(s)) > math.Log2(1+o.ring(got))+1.0/16 {
					t.Fatalf("chose %v (ring %.3f GB/s), %v has ring %.3f GB/s", got, o.ring(got), s, o.ring(s))
				}
				return
			}
			for j := start; j < len(free); j++ {
				rec(j+1, append(slices.Clone(s), free[j]))
			}
		}
		rec(0, nil)
	})
}
