package gang

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/scoring/fgd"
	"github.com/gputopo/gputopo/topology"
)

// Shares in gangs: pods whose Devices.Shared asks for a share of one
// GPU (memory and compute) instead of whole GPUs.

func sharedPod(mem uint64, milli int) Pod {
	return Pod{Devices: scoring.Request{Shared: &scoring.Share{MemoryBytes: mem, ComputeMilli: milli}}}
}

func sharedJob(name string, replicas int, mem uint64, milli int) *Job {
	return &Job{Name: name, PodSets: []PodSet{{Name: "s", Replicas: replicas, Pod: sharedPod(mem, milli)}}}
}

// oneNode is a snapshot of a single node with the given allocations.
func oneNode(tb testing.TB, node *topology.Node, allocs []Allocation) *Snapshot {
	tb.Helper()
	sp := spec{nodes: 1, topo: func(int) *topology.Node { return node }, allocs: allocs}
	return sp.build(tb)
}

// sharesFit is the brute-force count of identical shares one device takes:
// add shares to a checking state (NewStateFor) until one is refused.
func sharesFit(node *topology.Node, d int, used scoring.DeviceUsage, sl scoring.Share) int {
	st := scoring.NewStateFor(node)
	st.Devices[d] = used
	if node.Device(d).Health != topology.Healthy || used.Allocated || st.Validate() != nil {
		return 0
	}
	n := 0
	for n < 1000 && st.AllocateShared(d, sl) == nil {
		n++
	}
	return n
}

// TestSharedNodeCapacityIsMaximal: on random nodes whose GPUs are held
// whole, partly shared or free, the number of shared pods a gang places on
// the node equals the brute-force packing (shares added to each device until
// it refuses one, summed over the devices); whole-GPU pods of another pod
// set of the same job take whole free GPUs first, and the shared count that
// remains is again the brute-force packing of what they leave.
func TestSharedNodeCapacityIsMaximal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pool := []*topology.Node{
			nvswitchNode(t, "nv8", 8, "NVIDIA H100 80GB HBM3", h100Mem, false),
			pcieNode(t, "pcie6", 6),
			degraded(t),
		}
		node := pool[rapid.IntRange(0, len(pool)-1).Draw(t, "node")]
		n := node.Len()
		var allocs []Allocation
		usage := make([]scoring.DeviceUsage, n)
		for d := range n {
			switch rapid.IntRange(0, 3).Draw(t, "use") {
			case 0:
				allocs = append(allocs, Allocation{Pod: fmt.Sprintf("whole-%d", d), Node: "n00", Devices: []int{d}})
				usage[d].Allocated = true
			case 1:
				for k := range rapid.IntRange(1, 3).Draw(t, "shares") {
					sl := scoring.Share{MemoryBytes: uint64(rapid.IntRange(0, 24).Draw(t, "mem")) * gib, ComputeMilli: 50 * rapid.IntRange(0, 6).Draw(t, "milli")}
					if sl.MemoryBytes == 0 && sl.ComputeMilli == 0 {
						sl.ComputeMilli = 50
					}
					if usage[d].MemoryUsed+sl.MemoryBytes > node.Device(d).MemoryBytes || usage[d].ComputeUsed+sl.ComputeMilli > 1000 {
						continue // the snapshot would refuse it (tested elsewhere)
					}
					allocs = append(allocs, Allocation{Pod: fmt.Sprintf("share-%d-%d", d, k), Node: "n00", Devices: []int{d}, Shared: &sl})
					usage[d].MemoryUsed += sl.MemoryBytes
					usage[d].ComputeUsed += sl.ComputeMilli
					usage[d].Shares++
				}
			}
		}
		s, err := spec{nodes: 1, topo: func(int) *topology.Node { return node }, allocs: allocs}.try()
		require.NoError(t, err)
		want := scoring.Share{MemoryBytes: uint64(rapid.IntRange(0, 40).Draw(t, "wantMem")) * gib, ComputeMilli: 50 * rapid.IntRange(0, 10).Draw(t, "wantMilli")}
		if want.MemoryBytes == 0 && want.ComputeMilli == 0 {
			want.MemoryBytes = gib
		}
		best := 0
		for d := range n {
			best += sharesFit(node, d, usage[d], want)
		}
		best = min(best, 1000)
		j := &Job{Name: "shared", MinCount: 1, PodSets: []PodSet{{Name: "s", Replicas: 1000,
			Pod: Pod{Devices: scoring.Request{Shared: &want}}}}}
		r, err := Check(context.Background(), s, j)
		require.NoError(t, err)
		got := 0
		if r.Placement != nil {
			got = len(r.Placement.Pods)
			require.NoError(t, s.Validate(j, r.Placement), "Check's placement validates")
		}
		require.Equal(t, best, got, "shared pods of %+v on %s with usage %+v (verdict %v, reasons %v)", want, node.Name(), usage, r.Verdict, r.Reasons)

		// A second pod set of whole GPUs, all of which must start: they take
		// fully free devices; the shared set gets the brute-force packing of
		// the rest (fully free devices of one node are interchangeable).
		var freeDevs []int
		for d := range n {
			if node.Device(d).Health == topology.Healthy && !usage[d].InUse() {
				freeDevs = append(freeDevs, d)
			}
		}
		if len(freeDevs) == 0 {
			return
		}
		whole := rapid.IntRange(1, len(freeDevs)).Draw(t, "whole")
		rest := best
		// the whole pods take `whole` fully free devices, each of which
		// would take sharesFit(idle) shares
		for _, d := range freeDevs[:whole] {
			rest -= sharesFit(node, d, scoring.DeviceUsage{}, want)
		}
		mixed := &Job{Name: "mixed", MinCount: whole + 1, PodSets: []PodSet{
			{Name: "train", Replicas: whole, MinReplicas: whole, Pod: Pod{Devices: scoring.Request{Count: 1}}},
			{Name: "s", Replicas: 1000, Pod: Pod{Devices: scoring.Request{Shared: &want}}},
		}}
		r, err = Check(context.Background(), s, mixed)
		require.NoError(t, err)
		if rest == 0 {
			require.Nil(t, r.Placement, "nothing is left for a share after %d whole GPUs", whole)
			return
		}
		require.NotNil(t, r.Placement, "verdict %v, reasons %v", r.Verdict, r.Reasons)
		require.NoError(t, s.Validate(mixed, r.Placement))
		sharedPods := 0
		for _, pp := range r.Placement.Pods {
			if pp.Set == "s" {
				sharedPods++
			}
		}
		require.Equal(t, whole, r.Placement.GPUs(), "whole GPUs placed")
		require.Equal(t, rest, sharedPods, "shared pods beside %d whole GPUs", whole)
	})
}

// degraded is a 4-GPU NVSwitch node whose GPU 1 is unhealthy.
func degraded(tb fataler) *topology.Node {
	b := topology.NewBuilder().SetName("deg4")
	for i := range 4 {
		d := topology.Device{Index: i, Vendor: topology.VendorNVIDIA, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: h100Mem}
		if i == 1 {
			d.Health = topology.Unhealthy
		}
		b.AddDevice(d)
	}
	for i := range 4 {
		for j := i + 1; j < 4; j++ {
			b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: topology.LinkNODE})
		}
	}
	n, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// twoH100 is two 8-GPU H100 nodes, partly used: n00 has GPUs 0-3 held
// whole and a 60 GiB / 500m share on GPU 4; n01 has GPUs 0-1 held whole
// and a 40 GiB / 250m share on GPU 2.
func twoH100(tb testing.TB, extra ...Allocation) *Snapshot {
	h := nvswitchNode(tb, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	sp := spec{nodes: 2, levels: []string{lRack}, labels: func(int) map[string]string { return map[string]string{lRack: "r0"} },
		topo: func(int) *topology.Node { return h }}
	sp.allocs = append([]Allocation{
		{Job: "train", Pod: "train-0", Node: "n00", Devices: []int{0, 1, 2, 3}},
		{Job: "train", Pod: "train-1", Node: "n01", Devices: []int{0, 1}},
		{Job: "chat", Pod: "chat-0", Node: "n00", Devices: []int{4}, Shared: &scoring.Share{MemoryBytes: 60 * gib, ComputeMilli: 500}},
		{Job: "chat", Pod: "chat-1", Node: "n01", Devices: []int{2}, Shared: &scoring.Share{MemoryBytes: 40 * gib, ComputeMilli: 250}},
	}, extra...)
	return sp.build(tb)
}

// TestSharedGangOfInferencePods: a gang of 8 inference pods with 20 GiB
// shares fits on two partly used 8-GPU nodes; every pod gets one GPU and its
// share, no GPU is over-committed, and once assumed the snapshot holds the
// shares (a second identical gang fits only where room is left).
func TestSharedGangOfInferencePods(t *testing.T) {
	s := twoH100(t)
	j := sharedJob("infer", 8, 20*gib, 250)
	r := mustCheck(t, s, j)
	require.Equal(t, Fits, r.Verdict, "reasons %v", r.Reasons)
	require.Len(t, r.Placement.Pods, 8)
	assert.Equal(t, 0, r.Placement.GPUs(), "no whole GPUs")
	assert.Equal(t, 8, r.Placement.Shares())
	assert.Equal(t, Resources{Pods: 8, Shares: 8, SharedMemoryBytes: int64(160 * gib)}, r.Demand)
	mem := map[string]uint64{"n00/4": 60 * gib, "n01/2": 40 * gib}
	for _, pp := range r.Placement.Pods {
		require.Len(t, pp.Devices, 1, pp.Name)
		require.NotNil(t, pp.Shared, pp.Name)
		assert.Equal(t, scoring.Share{MemoryBytes: 20 * gib, ComputeMilli: 250}, *pp.Shared)
		key := fmt.Sprintf("%s/%d", pp.Node, pp.Devices[0])
		mem[key] += pp.Shared.MemoryBytes
		assert.LessOrEqual(t, mem[key], h100Mem, "GPU %s over-committed", key)
		assert.False(t, pp.Node == "n00" && pp.Devices[0] < 4 || pp.Node == "n01" && pp.Devices[0] < 2, "share on a GPU held whole: %s", key)
	}
	require.NoError(t, s.Assume(j, r.Placement))
	held := 0
	for _, a := range s.JobAllocations("infer") {
		require.NotNil(t, a.Shared, "assumed allocation %s keeps its share", a.Pod)
		held++
	}
	assert.Equal(t, 8, held)

	// Assume is all-or-nothing: the same placement again over-commits
	// some GPU (or reuses names) and changes nothing.
	before := len(s.Allocations())
	require.ErrorIs(t, s.Assume(j, r.Placement), ErrInvalidPlacement)
	assert.Len(t, s.Allocations(), before)

	// Capacity left: 13 + 22 shares of 20 GiB / 250m before, 8 taken.
	r2 := mustCheck(t, s, &Job{Name: "more", MinCount: 1, PodSets: []PodSet{{Name: "s", Replicas: 100, Pod: sharedPod(20*gib, 250)}}})
	require.NotNil(t, r2.Placement)
	assert.Len(t, r2.Placement.Pods, 13+22-8)
}

// TestSharedFragmented: 240 GiB of GPU memory are free in 30 GiB pieces,
// one per GPU; two 40 GiB shares do not fit, and the verdict says the
// memory is fragmented. Ten 30 GiB shares need more than is free: blocked.
func TestSharedFragmented(t *testing.T) {
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	var allocs []Allocation
	for d := range 8 {
		allocs = append(allocs, Allocation{Job: "other", Pod: fmt.Sprintf("o-%d", d), Node: "n00", Devices: []int{d},
			Shared: &scoring.Share{MemoryBytes: 50 * gib}})
	}
	s := oneNode(t, h, allocs)
	r := mustCheck(t, s, sharedJob("frag", 2, 40*gib, 0))
	require.Equal(t, Fragmented, r.Verdict, "reasons %v", r.Reasons)
	require.ErrorIs(t, r.Err(), ErrFragmented)
	assert.Equal(t, int64(240*gib), r.Free.SharedMemoryBytes)
	require.NotEmpty(t, r.Reasons)
	assert.Contains(t, r.Reasons[0], "fragmented")
	assert.Contains(t, r.Reasons[0], "245760 MiB of GPU memory")
	require.NotEmpty(t, r.Domains)
	assert.Equal(t, 8, r.Domains[0].Holders[0].Shares)
	assert.Contains(t, fmt.Sprint(r.Reasons), "held by other (8 shares)")

	r = mustCheck(t, s, sharedJob("big", 10, 30*gib, 0))
	require.Equal(t, Blocked, r.Verdict, "reasons %v", r.Reasons)
	assert.Contains(t, r.Reasons[0], "needs 307200 MiB of GPU memory for 10 shares, 245760 MiB are free")

	// 8 × 30 GiB fit exactly, one per GPU.
	r = mustCheck(t, s, sharedJob("fits", 8, 30*gib, 0))
	require.Equal(t, Fits, r.Verdict)
	seen := map[int]bool{}
	for _, pp := range r.Placement.Pods {
		seen[pp.Devices[0]] = true
	}
	assert.Len(t, seen, 8)
}

// TestSharedQueuePass: a queue pass mixes shared and whole-GPU jobs on one
// 8-GPU node: whole jobs take whole free GPUs, shared jobs pack shares on
// what is left (and on each other), and a job that no longer fits waits.
func TestSharedQueuePass(t *testing.T) {
	s := flat(t, 1).build(t)
	jobs := []Job{
		gpuJob("train", 5, 1, 1, 4, 0), // GPUs 0-3 (or another 4)
		*sharedJob("chat", 6, 40*gib, 0),
		*sharedJob("embed", 2, 20*gib, 500),
		gpuJob("late-whole", 0, 9, 1, 2, 0), // nothing whole is left
	}
	jobs[1].Arrival, jobs[2].Arrival = 2, 3
	plan, err := planQueue(context.Background(), s, jobs)
	require.NoError(t, err)
	act := map[string]queuepass.Action{}
	for _, e := range plan.Entries {
		act[e.Job] = e.Action
	}
	assert.True(t, act["train"].CanStart(), "train: %v", act["train"])
	assert.True(t, act["chat"].CanStart(), "chat: %v", act["chat"])
	assert.True(t, act["embed"].CanStart(), "embed: %v", act["embed"])
	assert.False(t, act["late-whole"].CanStart(), "late-whole: %v", act["late-whole"])

	// Apply the started jobs to a clone: the snapshot accepts them all
	// (nothing over-committed), and GPUs used whole hold no share.
	w := s.Clone()
	byName := map[string]*Job{}
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	whole := map[int]bool{}
	perGPU := map[int]uint64{}
	for _, e := range plan.Entries {
		if !e.Action.CanStart() {
			continue
		}
		require.NoError(t, w.Assume(byName[e.Job], e.Placement), e.Job)
		for _, pp := range e.Placement.Pods {
			for _, d := range pp.Devices {
				if pp.Shared == nil {
					whole[d] = true
				} else {
					perGPU[d] += pp.Shared.MemoryBytes
				}
			}
		}
	}
	assert.Len(t, whole, 4)
	for d, m := range perGPU {
		assert.False(t, whole[d], "gpu%d is held whole and shared", d)
		assert.LessOrEqual(t, m, h100Mem, "gpu%d", d)
	}
}

// TestSharedJobValidation: what a gang pod cannot ask for is refused with
// ErrInvalidJob naming the field; shares are checked up front.
func TestSharedJobValidation(t *testing.T) {
	w := scoring.DefaultWeights()
	bad := scoring.DefaultWeights()
	bad.Ring = math.NaN()
	cases := map[string]struct {
		pod  Pod
		want string
	}{
		"required":      {Pod{Devices: scoring.Request{Count: 1, Required: []int{0}}}, "Devices.Required"},
		"excluded":      {Pod{Devices: scoring.Request{Count: 1, Excluded: []int{0}}}, "Devices.Excluded"},
		"allowed sets":  {Pod{Devices: scoring.Request{Count: 2, AllowedSets: [][]int{{0, 1}}}}, "Devices.AllowedSets"},
		"affinity":      {Pod{Devices: scoring.Request{Count: 1, Affinity: scoring.Affinity{NUMA: []int{0}}}}, "Devices.Affinity"},
		"workload":      {Pod{Devices: scoring.Request{Count: 1, Workload: &fgd.Workload{}}}, "Devices.Workload"},
		"bad weights":   {Pod{Devices: scoring.Request{Count: 1, Weights: &bad}}, "Devices.Weights"},
		"shared count":  {Pod{Devices: scoring.Request{Count: 2, Shared: &scoring.Share{MemoryBytes: gib}}}, "want 0 or 1"},
		"shared memory": {Pod{Devices: scoring.Request{MinFreeMemory: gib, Shared: &scoring.Share{MemoryBytes: gib}}}, "MinFreeMemory"},
		"shared empty":  {Pod{Devices: scoring.Request{Shared: &scoring.Share{}}}, "neither memory nor compute"},
		"shared milli":  {Pod{Devices: scoring.Request{Shared: &scoring.Share{ComputeMilli: 1001}}}, "0..1000"},
		"shared MIG":    {Pod{MIGProfile: mig.MustParseProfileName("1g.10gb"), Devices: scoring.Request{Shared: &scoring.Share{MemoryBytes: gib}}}, "MIG profile"},
	}
	for name, c := range cases {
		j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: c.pod}}}
		err := j.Validate()
		require.ErrorIs(t, err, ErrInvalidJob, name)
		require.ErrorIs(t, err, topology.ErrInvalidRequest, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
	huge := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: sharedPod(MaxBytes+1, 0)}}}
	require.ErrorIs(t, huge.Validate(), topology.ErrLimit)
	// accepted: one share (Count 0 or 1), weights honoured within a node
	for _, p := range []Pod{sharedPod(gib, 0), {Devices: scoring.Request{Count: 1, Shared: &scoring.Share{ComputeMilli: 100}}}, {Devices: scoring.Request{Count: 2, Weights: &w}}} {
		j := &Job{Name: "j", PodSets: []PodSet{{Name: "w", Replicas: 1, Pod: p}}}
		require.NoError(t, j.Validate())
	}
	sp := sharedPod(gib, 0)
	assert.True(t, sp.IsShared())
	j := &Job{Name: "j", PodSets: []PodSet{{Name: "a", Replicas: 3, Pod: sharedPod(gib, 0)}, {Name: "b", Replicas: 2, Pod: Pod{Devices: scoring.Request{Count: 4}}}}}
	assert.Equal(t, 8, j.GPUs(), "shares are not whole GPUs")
}

// TestSharedWeightsHonoured: a pod's own weights choose its devices within
// a node (Fit only: best fit puts the share on the fullest GPU that takes
// it); the default weights are used when nil.
func TestSharedWeightsHonoured(t *testing.T) {
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	s := oneNode(t, h, []Allocation{{Pod: "a", Node: "n00", Devices: []int{5}, Shared: &scoring.Share{MemoryBytes: 50 * gib}}})
	fit := scoring.Weights{Fit: 1}
	p := sharedPod(20*gib, 0)
	p.Devices.Weights = &fit
	j := &Job{Name: "w", PodSets: []PodSet{{Name: "s", Replicas: 1, Pod: p}}}
	r := mustCheck(t, s, j)
	require.NotNil(t, r.Placement)
	assert.Equal(t, []int{5}, r.Placement.Pods[0].Devices, "best fit: the GPU with 30 GiB left")
}

// TestSharedValidateAndSnapshot: Validate and NewSnapshot refuse shares
// that do not fit, on GPUs held whole, or that differ from the pod's.
func TestSharedValidateAndSnapshot(t *testing.T) {
	h := nvswitchNode(t, "hgx", 8, "NVIDIA H100 80GB HBM3", h100Mem, false)
	s := oneNode(t, h, []Allocation{
		{Pod: "whole", Node: "n00", Devices: []int{0}},
		{Pod: "half", Node: "n00", Devices: []int{1}, Shared: &scoring.Share{MemoryBytes: 60 * gib, ComputeMilli: 800}},
	})
	j := sharedJob("j", 1, 30*gib, 100)
	sl := scoring.Share{MemoryBytes: 30 * gib, ComputeMilli: 100}
	pl := func(d int, s *scoring.Share) *Placement {
		return &Placement{Job: "j", Pods: []PodPlacement{{Name: "j-s-0", Set: "s", Node: "n00", Devices: []int{d}, Shared: s, SubGroup: -1}}}
	}
	require.NoError(t, s.Validate(j, pl(2, &sl)))
	for name, p := range map[string]*Placement{
		"held whole":   pl(0, &sl),
		"no room":      pl(1, &sl),
		"no share":     pl(2, nil),
		"other share":  pl(2, &scoring.Share{MemoryBytes: 10 * gib}),
		"out of range": pl(9, &sl),
		"two devices":  {Job: "j", Pods: []PodPlacement{{Name: "j-s-0", Set: "s", Node: "n00", Devices: []int{2, 3}, Shared: &sl}}},
	} {
		err := s.Validate(j, p)
		require.ErrorIs(t, err, ErrInvalidPlacement, name)
	}
	// a whole-GPU pod cannot take a shared GPU, nor carry a share
	wj := workers("w", 1, 1)
	require.ErrorIs(t, s.Validate(wj, &Placement{Job: "w", Pods: []PodPlacement{{Name: "w-worker-0", Set: "worker", Node: "n00", Devices: []int{1}}}}), ErrInvalidPlacement)
	require.ErrorIs(t, s.Validate(wj, &Placement{Job: "w", Pods: []PodPlacement{{Name: "w-worker-0", Set: "worker", Node: "n00", Devices: []int{2}, Shared: &sl}}}), ErrInvalidPlacement)

	bad := map[string][]Allocation{
		"over-committed": {
			{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{MemoryBytes: 50 * gib}},
			{Pod: "b", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{MemoryBytes: 40 * gib}},
		},
		"compute over": {
			{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{ComputeMilli: 600}},
			{Pod: "b", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{ComputeMilli: 600}},
		},
		"whole and shared": {
			{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{MemoryBytes: gib}},
			{Pod: "b", Node: "n00", Devices: []int{3}},
		},
		"shared after whole": {
			{Pod: "b", Node: "n00", Devices: []int{3}},
			{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{MemoryBytes: gib}},
		},
		"empty share":    {{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{}}},
		"share nowhere":  {{Pod: "a", Node: "n00", Shared: &scoring.Share{MemoryBytes: gib}}},
		"negative milli": {{Pod: "a", Node: "n00", Devices: []int{3}, Shared: &scoring.Share{ComputeMilli: -1}}},
	}
	for name, allocs := range bad {
		_, err := spec{nodes: 1, topo: func(int) *topology.Node { return h }, allocs: allocs}.try()
		require.ErrorIs(t, err, ErrInvalidSnapshot, name)
	}
	// Add is all-or-nothing with shares too
	n0 := len(s.Allocations())
	require.ErrorIs(t, s.Add(Allocation{Pod: "c", Node: "n00", Devices: []int{1}, Shared: &scoring.Share{MemoryBytes: 30 * gib}}), ErrInvalidSnapshot)
	assert.Len(t, s.Allocations(), n0)
	require.NoError(t, s.Add(Allocation{Pod: "c", Node: "n00", Devices: []int{1}, Shared: &scoring.Share{MemoryBytes: 20 * gib, ComputeMilli: 200}}))
	// GPU 1 is now full (80 GiB, 1000m): a 1 GiB share goes elsewhere
	r := mustCheck(t, s, sharedJob("x", 1, gib, 0))
	require.NotNil(t, r.Placement)
	assert.NotEqual(t, []int{1}, r.Placement.Pods[0].Devices)
	assert.NotEqual(t, []int{0}, r.Placement.Pods[0].Devices)
	// removing the pod frees its share
	require.Equal(t, 1, s.RemovePod("c"))
	require.NoError(t, s.Validate(sharedJob("j", 1, 20*gib, 200), pl(1, &scoring.Share{MemoryBytes: 20 * gib, ComputeMilli: 200})))
}
