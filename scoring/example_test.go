package scoring_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// An 8-GPU PCIe server with NVLink bridges on (0,2) (1,3) (4,5) (6,7), as
// `nvidia-smi topo -m` prints it.
const bridgedPairs = `	GPU0	GPU1	GPU2	GPU3	GPU4	GPU5	GPU6	GPU7	CPU Affinity	NUMA Affinity
GPU0	 X 	SYS	NV12	SYS	SYS	SYS	SYS	SYS	0-31	0
GPU1	SYS	 X 	SYS	NV12	SYS	SYS	SYS	SYS	0-31	0
GPU2	NV12	SYS	 X 	SYS	SYS	SYS	SYS	SYS	0-31	0
GPU3	SYS	NV12	SYS	 X 	SYS	SYS	SYS	SYS	0-31	0
GPU4	SYS	SYS	SYS	SYS	 X 	NV12	SYS	SYS	32-63	1
GPU5	SYS	SYS	SYS	SYS	NV12	 X 	SYS	SYS	32-63	1
GPU6	SYS	SYS	SYS	SYS	SYS	SYS	 X 	NV12	32-63	1
GPU7	SYS	SYS	SYS	SYS	SYS	SYS	NV12	 X 	32-63	1
`

// An HGX H100 board: every pair NV18 through NVSwitch.
func hgx() *topology.Node {
	var b strings.Builder
	for j := range 8 {
		fmt.Fprintf(&b, "\tGPU%d", j)
	}
	b.WriteString("\n")
	for i := range 8 {
		fmt.Fprintf(&b, "GPU%d", i)
		for j := range 8 {
			if i == j {
				b.WriteString("\t X ")
			} else {
				b.WriteString("\tNV18")
			}
		}
		b.WriteString("\n")
	}
	n, err := topology.ParseNvidiaSMI(strings.NewReader(b.String()), topology.NvidiaSMIOptions{Name: "hgx", Model: "NVIDIA H100 80GB HBM3"})
	if err != nil {
		panic(err)
	}
	return n
}

func ExampleSelectDevices() {
	node, err := topology.ParseNvidiaSMI(strings.NewReader(bridgedPairs), topology.NvidiaSMIOptions{Model: "NVIDIA A100-PCIE-40GB"})
	if err != nil {
		panic(err)
	}
	state := scoring.NewState(node.Len())
	_ = state.Allocate(0) // GPU 0 is busy

	// One GPU: take the stranded NVLink partner of the busy GPU rather than
	// half of an intact pair.
	r, err := scoring.SelectDevices(node, state, scoring.Request{Count: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println("1 GPU:", r.Devices())
	_ = state.Allocate(r.Devices()...)

	// Two GPUs: an NVLink pair, on the NUMA node already in use.
	r, err = scoring.SelectDevices(node, state, scoring.Request{Count: 2}, scoring.WithExplanation())
	if err != nil {
		panic(err)
	}
	fmt.Println("2 GPUs:", r.Devices(), "exact:", r.Exact)
	for _, c := range r.Components[:4] {
		fmt.Printf("  %-9s %.3f  %s\n", c.Name, c.Value, c.Detail)
	}
	fmt.Println("runner-up:", r.RunnerUp.Set)
	// Output:
	// 1 GPU: [2]
	// 2 GPUs: [1 3] exact: true
	//   ring      0.826  weakest link of the best ring 300.0 GB/s (fabric, ring class 388)
	//   aggregate 0.826  each member reaches the others at 300.0 GB/s (mean)
	//   numa      1.000  within 1 NUMA node
	//   pcie      1.000  mean pair PCIe closeness 1.000 (per pair: PIX or fabric 1, PXB 0.8, PHB 0.6, NODE 0.4, SYS or unknown 0.2)
	// runner-up: {4,5}
}

func ExampleScoreNode() {
	pcie, err := topology.ParseNvidiaSMI(strings.NewReader(bridgedPairs), topology.NvidiaSMIOptions{Name: "pcie", Model: "NVIDIA A100-PCIE-40GB"})
	if err != nil {
		panic(err)
	}
	req := scoring.Request{Count: 4}
	for _, node := range []*topology.Node{hgx(), pcie} {
		s, err := scoring.ScoreNode(node, nil, req)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %d/%d with %v\n", node.Name(), s.Score, scoring.MaxNodeScore, s.Result.Devices())
	}
	// Output:
	// hgx: 88/100 with [0 1 2 3]
	// pcie: 49/100 with [0 1 2 3]
}

func ExampleFragmentation() {
	// Typical workload: quarter-GPU and half-GPU shares and whole GPUs.
	w, err := fgd.NewWorkload([]fgd.Task{
		{GPUMilli: 250, GPUs: 1, Weight: 2},
		{GPUMilli: 500, GPUs: 1, Weight: 1},
		{GPUMilli: 1000, GPUs: 1, Weight: 1},
	})
	if err != nil {
		panic(err)
	}
	node := hgx()
	state := scoring.NewState(node.Len())
	_ = state.AllocateShared(0, scoring.Share{ComputeMilli: 750})
	f, err := scoring.Fragmentation(node, state, w)
	if err != nil {
		panic(err)
	}
	fmt.Printf("free %d milli-GPU, fragment %.0f (%.1f%%)\n", f.Free, f.Fragment, 100*f.Ratio)

	// A quarter-GPU share goes where it grows fragmentation least: into the
	// quarter left on GPU 0, rather than breaking a whole GPU.
	req := scoring.Request{Shared: &scoring.Share{ComputeMilli: 250}, Workload: w}
	r, err := scoring.SelectDevices(node, state, req)
	if err != nil {
		panic(err)
	}
	fmt.Println("share on", r.Devices())
	// Output:
	// free 7250 milli-GPU, fragment 125 (1.7%)
	// share on [0]
}

func ExampleCompile() {
	c, err := scoring.Compile(hgx())
	if err != nil {
		panic(err)
	}
	// The handle serves every state; tables are shared by all nodes with
	// the same topology fingerprint.
	for _, busy := range [][]int{nil, {0, 1, 2}} {
		st := scoring.NewState(c.Len())
		_ = st.Allocate(busy...)
		r, _ := c.Select(st, scoring.Request{Count: 2})
		fmt.Println(busy, "->", r.Devices())
	}
	// Output:
	// [] -> [0 1]
	// [0 1 2] -> [3 4]
}

func ExampleMode() {
	node, err := topology.ParseNvidiaSMI(strings.NewReader(bridgedPairs), topology.NvidiaSMIOptions{Model: "NVIDIA A100-PCIE-40GB"})
	if err != nil {
		panic(err)
	}
	state := scoring.NewState(node.Len())
	_ = state.Allocate(0, 4) // one GPU busy on each NUMA node

	// A scope is required unless the request says otherwise: ScopeMode's
	// zero value is ModeRequired, and no NUMA node has four free GPUs.
	req := scoring.Request{Count: 4, Scope: scoring.ScopeNUMA}
	_, err = scoring.SelectDevices(node, state, req)
	fmt.Println("required:", errors.Is(err, scoring.ErrUnsatisfiable))

	// Preferred: sets within one NUMA node would score higher; none exists,
	// so the best set spans both: the two intact NVLink pairs.
	req.ScopeMode = scoring.ModePreferred
	r, err := scoring.SelectDevices(node, state, req)
	if err != nil {
		panic(err)
	}
	fmt.Println("preferred:", r.Devices())

	// Modes read and write as text ("required", "preferred"), so file
	// formats and flags share the Go names.
	var m scoring.Mode
	if err := m.UnmarshalText([]byte("preferred")); err != nil {
		panic(err)
	}
	fmt.Println(m == scoring.ModePreferred, scoring.Mode(0))
	// Output:
	// required: true
	// preferred: [1 3 6 7]
	// true required
}

// Request first is the default: a request gets the strongest ring that is
// free, even when that breaks a pair a later request could have used.
// Weights.Trade weighs everything in one mean instead, so look-ahead can
// win: here it keeps the NV1 pair {2,3} intact for the next request and
// gives this one the other NV1 pair.
func ExampleWeights_trade() {
	b := topology.NewBuilder().SetName("mesh")
	for i, numa := range []int{0, 0, 1, 1} {
		b.AddDevice(topology.Device{Index: i, Model: "Tesla V100-SXM2-16GB", NUMA: numa})
	}
	pcie := func(i, j int) topology.LinkKind {
		if i/2 == j/2 {
			return topology.LinkPIX
		}
		return topology.LinkSYS
	}
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: pcie(i, j)})
		}
	}
	b.SetLinkPair(0, 1, topology.Link{Kind: topology.LinkNVLink, Lanes: 1, PCIe: topology.LinkPIX})
	b.SetLinkPair(2, 3, topology.Link{Kind: topology.LinkNVLink, Lanes: 1, PCIe: topology.LinkPIX})
	b.SetLinkPair(0, 2, topology.Link{Kind: topology.LinkNVLink, Lanes: 2, PCIe: topology.LinkSYS})
	node, err := b.Build()
	if err != nil {
		panic(err)
	}
	first, err := scoring.SelectDevices(node, nil, scoring.Request{Count: 2})
	if err != nil {
		panic(err)
	}
	w := scoring.DefaultWeights()
	w.Trade = true
	traded, err := scoring.SelectDevices(node, nil, scoring.Request{Count: 2, Weights: &w})
	if err != nil {
		panic(err)
	}
	fmt.Println("request first:", first.Devices())
	fmt.Println("trade:", traded.Devices())
	// Output:
	// request first: [0 2]
	// trade: [0 1]
}
