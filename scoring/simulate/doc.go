// Package simulate replays GPU cluster traces to compare placement
// policies: the fragmentation experiment of the FGD paper ("Beware of
// Fragmentation", Weng et al., USENIX ATC'23) on the Alibaba openb trace,
// reproduced in plain Go, with the paper's policies and gputopo's own.
//
// # Inputs
//
// [ReadNodes] and [ReadPods] read the trace's CSV node and pod lists
// (openb_node_list_*.csv, openb_pod_list_*.csv, including the 5-column
// multigpu variant), rejecting malformed rows with their line number. They
// stream their input within stated bounds (see Limits; errors wrap
// [ErrParse] and topology.ErrLimit), so a 50 MB line costs a few hundred
// KB before it is refused; a failing reader's error wraps [ErrRead]. Memory is in bytes
// everywhere ([Node.MemoryBytes], [Pod.MemoryBytes], [State.FreeMemory]);
// the readers convert the trace's MiB.
// [Synthetic] generates lists of the same shape when the trace is absent;
// [SyntheticMix] the same with a chosen [Mix]: the shares of GPU pods that
// pin a GPU model, share a GPU, or ask several GPUs.
//
// # Protocol
//
// [Replay] follows the paper's simulator: only GPU nodes, every GPU 1,000
// milli-GPU; pods sorted by name, shuffled by the seed, then inflated with
// random clones until their GPU requests reach 130% of capacity; nodes in
// a seeded order; each pod tried once (arrival only, nothing leaves)
// against filters for CPU, memory, GPU count and share, and GPU model; the
// feasible node with the top score wins, or the pod fails. After each pod
// the replay records arrived and allocated GPU and the cluster's expected
// fragment under the typical task shapes of the original list. [Result.Bins]
// averages those by arrival percentage as the paper's analysis does, and
// [ReplayAll] runs an [Experiment] (policies × seeds) on all cores.
//
// # Topology
//
// A [Node] may carry a Topology (a machine of package provider/catalog, or
// any topology.Node with its GPU count). The policy still picks the node;
// a pod of several whole GPUs then takes the devices
// scoring.SelectDevices chooses among the node's fully free GPUs, and its
// [Placement] records a [PodBandwidth]: the ring bottleneck and aggregate
// bandwidth it got beside the best any set of as many GPUs has on the
// empty machine. [SummarizeBandwidth] reports them per policy, so what a
// policy's node choice costs the pods' own bandwidth is visible.
//
// # Options, context and errors
//
// What a replay computes is data: the node and pod lists, the policies and
// seeds, and the protocol's [Config]. How it runs is an [Option]:
// [WithWorkers] and [WithProgress], a hook called after every pod. Every
// call that can take more than about a millisecond ([ReadNodes],
// [ReadPods], [Synthetic], [TypicalWorkload], [Replay], [ReplayAll]) takes
// a context and returns an error wrapping its error once it is done; a
// replay looks at it before every pod. Other errors wrap the package's
// sentinels: [ErrParse] (topology.ErrParse) for malformed input,
// [ErrRead], and [ErrInvalidConfig], [ErrNoPods], [ErrInvalidPod],
// [ErrInvalidCluster] and [ErrInvalidPlacement], which all wrap
// topology.ErrInvalidRequest.
//
// # Limits
//
// Inputs are bounded, and an input beyond a limit fails with an error
// wrapping topology.ErrLimit that names the limit ("simulate limit
// maxRows"). [MaxGPUsPerNode], [MaxInflation], [MaxReplayPods] and
// [MaxSyntheticNodes] are exported (the gputopo CLI checks its flags and
// cluster files against them); the others are documented here:
//
//	limit                  value        bounds
//	maxLineBytes           64 KiB       one line of a CSV list
//	maxColumns             256          the columns of its header
//	maxRows                1,048,576    the rows after the header
//	maxCSVBytes            256 MiB      a whole CSV list
//	maxBandwidthGPUs       8            GPUs of a pod whose bandwidth a replay measures (larger pods are placed, not measured)
//	maxBandwidthNodeGPUs   16           GPUs of a node on which pods' bandwidth is measured
//	maxClassDemandTasks    1,048,576    the tasks of Lookahead's per-class demand evaluators in one replay (further node classes use the whole cluster's)
//
// # Tie-breaking
//
// The scores of the paper's policies are integers from 0 to 100, so ties
// are common, and how they are broken decides the result. Breaking them
// by the first node in the seeded node order ([TieFirst], the default)
// reproduces the published allocations within 0.2 points; breaking them
// uniformly at random ([TieRandom], what stock kube-scheduler does) changes
// the mean allocation at 100% arrival (seeds 42-51) from 95.28 to 89.77%
// for FGD, 91.82 to 88.52% for Clustering, 91.88 to 88.60% for Packing,
// 90.60 to 90.13% for DotProd and 92.94 to 92.89% for BestFit: ties
// resolved in a fixed order consolidate pods on the same nodes. Random
// ignores the tie-break (its scores are random); [Lookahead] moves from
// 95.77 to 95.34%. Within a node, equal GPUs go to the lowest index.
//
// # Policies
//
// A [Policy] makes a [Scorer] per replay; implement one to try your own.
// The built-ins ([Policies], [PolicyByName]) are the paper's [Random],
// [DotProd], [Clustering], [Packing], [BestFit] and [FGD], and gputopo's
// [Lookahead], which measures FGD's fragmentation against the demand that
// can actually use each node and ranks the nodes FGD's score rates alike
// by a look-ahead term for GPUs that CPU will strand (see its doc). The
// fragmentation maths itself lives in package scoring/fgd, where node
// scoring (package scoring) uses it too.
package simulate
