// Package scoring chooses devices on one node and scores nodes for a
// request: pure placement maths over a topology.Node (what the hardware is)
// and a State (what is in use now).
//
// # API
//
//   - [SelectDevices] returns the best device set for a [Request] with an
//     explanation on demand ([WithExplanation]): every score component by
//     name, and the runner-up with why it lost.
//   - [ScoreNode] maps the objective value of a node's best set to
//     0..[MaxNodeScore] (kube-scheduler's MaxNodeScore).
//   - [Compile] prepares a node once; the handle is cached per node and its
//     tables are shared by every node of the same shape (see Caches).
//   - [State] records whole allocations and shares per device; its
//     methods are all-or-nothing ([NewStateFor] also checks each device's
//     memory).
//   - [Fragmentation] measures how much of a node's free capacity a typical
//     workload cannot use (FGD's definition).
//
// Every error wraps one of [ErrInvalidRequest], [ErrInsufficientDevices],
// [ErrRequiredUnavailable], [ErrUnsatisfiable], [ErrTooManyDevices].
//
// # Objective
//
// Let F be the usable devices: healthy, not in Request.Excluded, not in use
// (for a share: not allocated whole, with room for the share's memory
// and compute), with at least Request.MinFreeMemory free. Let k be the
// request's count.
//
// (a) Hard constraints. A candidate is a set S ⊆ F with |S| = k that holds
// every required device, lies within one scope of the requested kind when
// the scope is required (Request.ScopeMode is [ModeRequired], its zero
// value), and, when Request.AllowedSets lists sets of k
// devices, is one of them. There is no candidate → ErrUnsatisfiable.
//
// Each candidate gets components in [0,1] (higher is better); its score is
// their weighted mean under [Weights] (DefaultWeights unless the request
// sets its own). The chosen set is the first candidate in the order of
// "Request first" below.
//
// (b) Communication quality of S (for k = 1 these are all 1):
//
//   - ring: g(the bandwidth of the bottleneck of S's best ring), where the
//     best ring is the Hamiltonian cycle over S whose weakest link is
//     strongest, links ordered fabric before PCIe before no path, then by
//     bandwidth (for k = 2, the pair's link). This models ring all-reduce.
//   - aggregate: g(the mean, over members, of the bandwidth a member has to
//     the others). An NVSwitch link is a GPU's total into a shared fabric,
//     so it counts divided among the k-1 peers rather than once per peer.
//
// Bandwidths are the per-direction estimates of topology.Link.Bandwidth; a
// link of known kind without a bandwidth gets topology.EstimateBandwidth
// of its kind; no path at all ("none") is 0 GB/s, the worst case. g(b) =
// log2(1+b) / log2(1+1000) for b in GB/s, capped at 1: every doubling of
// bandwidth is worth the same, and values do not depend on the node, so
// scores compare across nodes.
//
// (c) Locality of S:
//
//   - numa: 1 / (number of NUMA nodes S spans). Devices of unknown NUMA node
//     are grouped by CPU affinity; a device with neither adds no NUMA node
//     (unknown is neutral, never a penalty).
//   - pcie: the mean over pairs of the PCIe closeness of the path the pair's
//     traffic takes: 1 for a fabric link (its traffic does not cross PCIe,
//     so the class beneath it, which nvidia-smi's NV# hides, does not
//     matter), else by PCIe class (PIX 1, PXB 0.8, PHB 0.6, NODE 0.4, SYS
//     0.2); an unknown class counts as SYS, the worst known one, never
//     below it.
//   - affinity (only when Request.Affinity is set): the mean over members of
//     1 on a preferred NUMA node / the PCIe closeness to the nearest
//     preferred NIC (an unknown path counts as SYS).
//   - scope (only for a Request.Scope with ScopeMode [ModePreferred]): 1
//     when S lies within one scope of that kind, else 0.
//
// The set's own quality u(S) is the weighted mean of ring, aggregate, numa
// and pcie.
//
// Unknown information in summary: a missing PCIe class scores as SYS; a
// missing NUMA node (and CPU affinity) adds no NUMA node to a span; a
// missing bandwidth on a known link is its kind's estimate. Only a pair
// with no known path at all scores 0 bandwidth. So a node read from
// nvidia-smi text chooses as the same node with full information wherever
// the text holds what decides the choice (tested on every shared topology
// with an nvidia-smi matrix).
//
// (d) What S leaves behind:
//
//   - lookahead: min(u(S), P_L(F \ S)) with L = max(k, 2), where P_L(R) is
//     the largest achievable value, over partitions of R into ⌊|R|/L⌋ groups
//     of L devices (the |R| mod L devices left over are not scored), of the
//     smallest u of a group (∞ when |R| < L). So S is judged together with
//     the best way the rest can still serve requests of the same size, as
//     go-gpuallocator's BestEffort policy does, but as a max-min over groups
//     rather than a sum, without scoring padded leftovers, and for k = 1
//     with pairs, so that a single device takes the stranded partner of a
//     broken pair rather than half of an intact one. Not used for shared
//     slices.
//   - packing: best fit. For each scope kind that groups 2+ devices on the
//     node (fabric island, PCIe switch tree, NUMA node, package), the share
//     of the free devices in the scopes S touches that S takes, averaged
//     over the kinds: completing a half-used switch or NUMA node beats
//     breaking an intact one.
//   - fit (shares only): the mean over members of how full the
//     device's memory is after the share (best fit).
//   - fragmentation (shares with Request.Workload only):
//     1/(1+exp(Δ/1000)), where Δ is the change, in milli-GPU, of the node's
//     expected fragment under FGD's definition (see [Fragmentation]) when
//     every member receives the share: 0.5 for no change, higher when the
//     share fills a device that typical tasks could not use anyway. Device
//     memory counts on both sides: a device's free capacity is the smaller
//     of its free compute and its free memory share, before and after the
//     share (its memory and its compute).
//
// # Request first
//
// By default (Weights.Trade false, Weights.Ring > 0) the request's own
// quality decides before anything done for other requests. Candidates
// compare lexicographically by
//
//  1. the ring class of S (below): a higher class always wins;
//  2. when active, the weighted mean of affinity and preferred scope,
//     quantised to steps of 2^-20 (about 1e-6);
//  3. the fabric lanes of S: the sum over its pairs of the lanes of a
//     fabric link (NVLink, NVSwitch, xGMI; at least 1 per fabric link),
//     PCIe and no path counting 0 (when Weights.Aggregate > 0);
//  4. the number of its pairs whose devices share a known NUMA node (or,
//     both without one, the same CPU affinity; unknown pairs count as not
//     shared) (when Weights.NUMA > 0);
//  5. the summed PCIe closeness of its pairs, as in the pcie component (a
//     fabric pair is the closest) (when Weights.PCIe > 0);
//  6. the score (the weighted mean of all components), so the bandwidth
//     within a ring class and the aggregate bandwidth, then look-ahead,
//     packing, fit and fragmentation (d) break ties among sets equal on
//     all of the above;
//  7. the lexicographically smallest sorted index list.
//
// Levels 3 to 5 are exact sums on nodes of up to 16 devices; on larger
// nodes a sum that could exceed its 12- or 8-bit field is scaled to it.
// So among the sets with the request's best ring, its own NUMA locality,
// then PCIe closeness, come before look-ahead and packing: a 4-GPU job
// on an 8-GPU node of two NUMA nodes stays inside one when a NUMA node
// has 4 free GPUs of the best ring class.
//
// The ring class orders the bottleneck link of S's best ring: a ring of
// fabric links (NVLink, NVSwitch, xGMI) beats any ring with a PCIe hop,
// which beats any ring with a hop of no known path; within each group, by
// bandwidth in tiers of 1/16 octave, tier = ⌊16·log2(1 + GB/s)⌋. That is
// the tolerance: bottlenecks less than about 4.4% apart may share a class
// (and then the ring component, part of the score, still prefers the
// stronger among sets equal on the levels after the class), bottlenecks further apart never do. A single device has
// the highest class. So a request never gets a weaker ring than a free set
// of its size offers, nor a PCIe hop when an all-fabric ring is free, to
// protect a later request.
//
// Weights trade: with Weights.Trade set (or Weights.Ring = 0) the order is
// the score alone, the weighted mean of every component, and a user may
// give up some of this request's ring, lanes or locality for look-ahead or
// packing (see the Weights example). Result.Score is the weighted mean
// either way, so scores compare across nodes; request first, a runner-up
// may score higher than the winner when it loses on one of the levels
// above, and RunnerUp.Why says which.
//
// # Fragmentation
//
// [Fragmentation] measures a node's free state as FGD (Weng et al., USENIX
// ATC'23) does: for a workload of typical task shapes with popularities
// ([fgd.Workload]), the expected free capacity a task drawn from it could not
// use. It reuses package [github.com/gputopo/gputopo/scoring/fgd], which
// implements FGD's definitions (memory in bytes).
//
// Device memory is part of a device's free capacity: FGD's free milli-GPU
// of a device is the smaller of its free compute and 1000 × free memory /
// capacity (rounded down), so a GPU whose shares hold all its memory is not
// free capacity however little compute they use, and one whose shares hold
// 60 of 80 GiB serves at most a quarter-GPU task (a task's memory is taken
// as proportional to its compute share). FreeFragment.MemoryBound says how
// much free compute memory strands. With no memory in use the measure is
// FGD's own; package scoring/fgd (and the simulator's reproduction of the
// paper) is unchanged.
//
// # Exactness and speed
//
// Nodes of up to 16 devices are solved exactly. Every subset's ring,
// aggregate, NUMA and PCIe terms are tabulated once per topology (a
// bottleneck Hamiltonian-path dynamic programme over all subsets at once),
// the partition values P_L once per topology, weights and L (on first use),
// and the search scores every candidate set at O(1) table lookups each.
// Result.Exact is true. A selection without explanation allocates nothing.
//
// Larger nodes (64 logical MI300X devices in CPX mode, NVL72 domains,
// several NVSwitch islands) are searched on collapsed cliques: devices that
// are interchangeable (identical links to everything else and to each
// other, same NUMA node, scopes and NICs: the partitions of one package, the
// GPUs of an NVSwitch island behind one PCIe switch) form classes, a set
// becomes a count per class, interchangeable classes are filled in order,
// and every remaining count vector is scored with exact aggregate, locality,
// packing and fit terms, a ring that traverses each class contiguously and
// a greedy look-ahead partition (both lower bounds), pruned by a
// spanning-tree bound. Result.Exact is false and Result.Score is a lower
// bound of the chosen set's exact objective (its ring class, taken from the
// contiguous ring, is a lower bound too). The package tests force this
// search on every real node of up to 16 devices and on random nodes, and
// measure its gap to the exact optimum.
//
// Ties are broken by the lexicographically smallest device list, so results
// are deterministic; relabelling devices changes which of several tied
// sets is returned, never the score.
//
// # Caches
//
// Compiled tables are cached by what they depend on, never by identity:
// per-subset tables by hardware shape (links, NUMA, scopes, NICs, memory,
// health and model; not names, UUIDs or PCI addresses), weight-dependent
// tables by the shape and the normalised ring/aggregate/NUMA/PCIe weights
// (settings with the same ratios share them), FGD evaluators by the
// workload's content and the GPU model. A handle per *topology.Node (nodes
// are immutable) makes the repeated call cheap. Every cache is bounded
// (the cacheMax limits in the Limits table below; the table budget holds
// once for shape tables and again for weight tables) and evicts the least
// recently used entries (CLOCK), so a long-running scheduler on a churning
// fleet holds a bounded amount of memory, about 200 MiB at worst; an
// evicted entry is rebuilt on the next use.
//
// # Limits
//
// Inputs are bounded, and a request over a size limit fails with an error
// wrapping topology.ErrLimit that names the limit. [MaxDevices] is exported
// (callers size per-device tables by it); the others are documented here:
//
//	limit                   value        bounds
//	MaxDevices              256          devices of a node scored
//	maxNUMANode             1,023        NUMA ids in Request.Affinity.NUMA
//	maxAllowedSets          4,096        entries of Request.AllowedSets
//	maxLargeCandidates      262,144      count vectors one large-node search scores (then the best found is returned)
//	cacheMaxNodes           8,192        cached node handles (each pins its node)
//	cacheMaxNodePairs       524,288      the sum of devices² over cached node handles
//	cacheMaxTableBytes      64 MiB       shape tables, and again weight-dependent tables
//	cacheMaxEvaluators      1,024        cached FGD evaluators
//	cacheMaxEvaluatorBytes  16 MiB       the FGD evaluators' size
//
// # Concurrency
//
// SelectDevices, ScoreNode and the methods of [Compiled] are safe for
// concurrent use. A [State] is a plain value: callers synchronise its
// mutation.
package scoring
