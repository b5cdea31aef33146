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
//   - [Compile] prepares a node once; the result is cached by
//     topology.Fingerprint and shared by every node of the same shape.
//   - [State] records whole allocations and shared slices per device.
//
// Every error wraps one of [ErrInvalidRequest], [ErrInsufficientDevices],
// [ErrRequiredUnavailable], [ErrUnsatisfiable], [ErrTooManyDevices].
//
// # Objective
//
// Let F be the usable devices: healthy, not in Request.Excluded, not in use
// (for a shared slice: not allocated whole, with room for the slice's memory
// and compute), with at least Request.MinFreeMemory free. Let k be the
// request's count.
//
// (a) Hard constraints. A candidate is a set S ⊆ F with |S| = k that holds
// every required device, lies within one scope of the requested kind when
// the scope is required, and, when Request.AllowedSets lists sets of k
// devices, is one of them. There is no candidate → ErrUnsatisfiable.
//
// Each candidate gets components in [0,1] (higher is better); its score is
// their weighted mean under [Weights] (DefaultWeights unless the request
// sets its own). The chosen set has the highest score; among equal scores,
// the lexicographically smallest sorted index list.
//
// (b) Communication quality of S (for k = 1 these are all 1):
//
//   - ring: g(the bottleneck bandwidth of S's best ring), where the best ring
//     is the Hamiltonian cycle over S whose weakest link is strongest (for
//     k = 2, the pair's link). This models ring all-reduce.
//   - aggregate: g(the mean, over members, of the bandwidth a member has to
//     the others). An NVSwitch link is a GPU's total into a shared fabric,
//     so it counts divided among the k-1 peers rather than once per peer.
//
// Bandwidths are the per-direction estimates of topology.Link.Bandwidth; a
// missing link ("none") is 0 GB/s, the worst case. g(b) = log2(1+b) /
// log2(1+1000) for b in GB/s, capped at 1: every doubling of bandwidth is
// worth the same, and values do not depend on the node, so scores compare
// across nodes.
//
// (c) Locality of S:
//
//   - numa: 1 / (number of NUMA nodes S spans). Devices of unknown NUMA node
//     are grouped by CPU affinity.
//   - pcie: the mean over pairs of the PCIe path class (PIX 1, PXB 0.8, PHB
//     0.6, NODE 0.4, SYS 0.2, unknown 0); for fabric links, the PCIe path
//     beneath them.
//   - affinity (only when Request.Affinity is set): the mean over members of
//     1 on a preferred NUMA node / the PCIe closeness to the nearest
//     preferred NIC.
//   - scope (only for a preferred Request.Scope): 1 when S lies within one
//     scope of that kind, else 0.
//
// The set's own quality u(S) is the weighted mean of ring, aggregate, numa
// and pcie.
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
//   - fit (shared slices only): the mean over members of how full the
//     device's memory is after the slice (best fit).
//
// # Exactness and speed
//
// Nodes of up to 16 devices are solved exactly: every subset's ring,
// aggregate, NUMA and PCIe terms are tabulated once per topology (a
// bottleneck Hamiltonian-path dynamic programme over all subsets), the
// partition values P_L once per topology, weights and L, and the search
// enumerates all candidates at O(1) each. Result.Exact is true.
//
// Larger nodes are searched by the method documented on Compiled.Select for
// large nodes; Result.Exact reports whether that search proved optimality.
package scoring
