// Package gang decides whether a distributed job fits a GPU cluster all at
// once, and where: every worker of a gang is placed, on nodes, devices and
// MIG slots chosen together across the cluster's topology tiers, or none is.
// It also finds the fewest whole jobs to preempt for a high-priority gang,
// and grows and shrinks elastic jobs. Package gang/queue runs passes over
// queues of such jobs (a reservation for the head of the line with
// backfill that never delays it, fair share) and plans domain-clearing
// preemption, with this package's checks.
//
// # Model
//
// A [Job] has pod sets ([PodSet]: replicas, a per-pod [Pod] request of whole
// GPUs with scoring's node-level constraints, GPU memory, a MIG profile, CPU,
// memory, a node selector, node affinity expressions required and
// preferred, tolerations: package gang/noderule's types), a gang threshold (Job.MinCount overall,
// PodSet.MinReplicas per set), a priority, a queue, an arrival order and a
// declared run time. Topology constraints ([Constraint]) confine the whole
// job or one pod set to one domain of a level of the cluster tree, required
// or preferred; [SubGroups] cut a pod set into sub-groups of a fixed pod count,
// each in one domain; [NVLink] asks for multi-node NVLink, which confines the
// gang (or each of its clique-sized sub-groups) to one NVLink partition. Levels
// are named by the cluster's label keys, HyperNode tiers, or the short names
// "node", "clique", "rack", "block".
// A pod set marked AllOrNothing is a sub-group that starts with at least
// its MinReplicas or not at all, so a job's MinCount may be below its
// sub-groups' minimums; sub-groups of a fixed size with a minimum number
// of them (segments) are SubGroups with MinReplicas a multiple of the size.
// A preference never places fewer pods than the same job without it: a
// preferred domain that holds the thresholds but fewer pods than the
// looser placement is passed over.
//
// A [Snapshot] is the cluster at one moment: a topology.Cluster, per node
// [NodeInfo] (CPU, memory, pod count, cordon, readiness, taints, MIG
// mode, pre-created MIG instances) and the running pods
// ([Allocation]), some of which may be terminating (Allocation.Releasing).
// Planners read snapshots and never change them; Snapshot.Assume,
// Snapshot.Add, Snapshot.RemovePod and Snapshot.RemoveJob update one as pods
// start and end, all or nothing. Identical machines share their
// device-choice work: a snapshot compiles each hardware shape once (device
// UUIDs and PCI addresses aside) and caches choices per usage pattern.
//
// # Feasibility
//
// [Check] returns a [Result]: a complete [Placement] (pod → node → devices or
// MIG slot) when the job fits now ([Fits]) or once terminating pods are gone
// ([FitsAfterRelease], pipelined); otherwise a typed verdict with reasons:
// [Blocked] (not enough capacity free, with the domains closest to fitting
// and the jobs holding them), [Fragmented] (enough free in total, but no
// domain holds the shape) or [NeverFits] (not even the empty cluster holds
// it). A failed check changes nothing. Pods of the job already in the
// snapshot are members the placement completes, so the same call answers
// "can this gang still be completed" at Permit time.
//
// The search is exact, not greedy. Nodes with the same hardware shape and
// the same usage form one class; for each class and pod shape, the sequence
// of device sets that scoring.SelectDevices (whole GPUs) or mig.Place (MIG
// slots) chooses pod after pod is computed once and cached; a MIG pod first
// takes an idle pre-created instance of its profile (NodeInfo.MIGInstances;
// the slot says Existing), and only then creates one in free slices (idle
// instances of other profiles keep theirs). Memory slices are counted from
// the profile tables (1g.20gb is 2 on an H100). The length of that sequence
// is the node's capacity for the shape. A dynamic programme over the domain
// tree then computes, for every domain, the set of pod-count vectors (one
// count per pod set) its nodes can hold under the job's constraints: counts
// add up across children, sub-groups round down to whole sub-groups at their
// level, a pod set confined to one domain takes its pods from one child
// only, and placed members are lower bounds. For a single pod set this is
// one integer per domain, computed in one pass over the nodes. The gang fits
// exactly when some domain of the job's level holds the thresholds. A node's
// vectors place the pod sets one after the other, each set's pods taking its
// greedy sequence on what the sets before left; every order of the sets that
// ask for devices is tried, up to 24 orders that differ in their device
// shapes (a large share first can leave no room for three small ones that
// fit first; two sets of one shape take the same devices in either order),
// and the placement reads each node's devices in the order that found its
// counts. The placement descends from the tightest such domain (BestFit: the
// least capacity for the job, then the fewest free GPUs, then the least room
// for the job's pods with every resource they ask for counted: devices, MIG
// slices, shared memory, CPU, memory; or Balanced, or LeastFreeCapacity,
// which fills the sub-domains with the least room first), splitting the
// counts over children so that what remains stays feasible at every step,
// and reads each node's devices off its cached sequence.
//
// The verdicts are exact relative to each node's capacity; Result.Proven is
// false only when a pod-count frontier exceeded its bound (jobs with several
// pod sets and large replica counts) or a node tried its pod sets in one
// order only (more than 24 orders of device shapes). Node capacity is the
// greedy sequence's length, which equals the true maximum whenever scoring's
// hard constraints partition the devices (no scope, or one scope kind);
// property tests check it, and the two-shape step the frontier relies on,
// against brute force on synthetic and real machines, and mig.Place's count
// against the best MIG packing.
//
// # Queues
//
// Package gang/queue runs scheduling passes over queues of pending jobs on
// a Snapshot, with this package's checks: PlanQueue (priority, weighted
// fair share between queues, a head-of-line reservation with EASY
// backfill), PlanFairShare (a queue tree with deserved quota, limit,
// over-quota weight and reclaim) and PlanWaitForBetter (jobs that wait
// for a tighter topology level before accepting a looser one).
//
// # Preemption
//
// [Preempt] finds, for a gang that does not fit, the fewest whole
// lower-priority jobs inside one domain whose removal makes it fit, never a
// part of a gang, with the cost of the eviction. Package gang/queue's
// ClearDomain plans, for a hierarchical job that fits nowhere, the
// cheapest domain of its required level to clear, as a target the
// scheduler holds across cycles while the victims terminate.
//
// # Beyond one flat job
//
// [CheckGroups] places a hierarchical job ([HierJob]: a tree of [Group]s,
// depth ≤ 4, each with its own level; leaves with min/max pods and sub-groups),
// every group's constraint holding across all its sub-groups, by branch
// and bound over domain choices with a work budget (HierResult.Proven,
// Optimal, Gap) and a verdict per group; [Job.Hierarchical] gives a flat
// job's hierarchical form. [ScaleUp] and [Snapshot.ShrinkOrder] grow and
// shrink elastic jobs.
//
// # Files
//
// Package gang/gangfile reads the YAML or JSON job and cluster files of the
// gputopo gang command into this package's values.
//
// # Limits
//
// Inputs are bounded before anything grows with them (see [MaxNodes],
// [MaxJobPods] and the other Max constants, exported because package
// gangfile and schedulers bound their own inputs by them): a value beyond
// a limit fails with an error wrapping topology.ErrLimit that names the
// limit. The limits and defaults no caller needs to name are documented
// here:
//
//	limit                      value         bounds
//	maxQueueWork               33,554,432    one queue.PlanQueue pass: jobs × nodes (512 jobs on 65,536 nodes)
//	maxFairJobs                32,768        pending jobs of one queue.PlanFairShare pass
//	maxFairWork                134,217,728   one queue.PlanFairShare pass: jobs × nodes
//	maxQueueDepth              8             depth of a queue.FairShare queue tree (a top-level queue is 1)
//	maxGroupUnits              4,096         groups and sub-groups one CheckGroups search assigns
//	maxWarnings                100           Snapshot.Warnings kept (then one line counts the rest)
//	defaultGroupBudget         16,384        CheckGroups' domain choices without WithSearchBudget
//	defaultClearingBudget      2,048         queue.ClearDomain's fit tests without queue.WithSearchBudget
//	tidyDeadAllocations        1,024         removed allocations a snapshot keeps (or as many as it has live ones)
//	tidyCacheClasses           32            usage patterns a snapshot's cache keeps (or tidyCacheClassesPerNode per node)
//	tidyCacheClassesPerNode    2             usage patterns per node a snapshot's cache may keep
//	tidyCacheSequences         128           pod sequences (per usage pattern and pod shape) a snapshot's cache keeps (or tidyCacheSequencesPerNode per node)
//	tidyCacheSequencesPerNode  4             pod sequences per node a snapshot's cache may keep
//	cacheMaxCapEntries         1,048,576     device capacities (per pod shape and usage pattern) a snapshot's cache shares between solvers
//	maxNodeOrders              24            orders of a job's pod sets with devices a node tries (beyond, one order, unproven)
//
// Victim searches scale their budget to the snapshot's size, and
// Preemption.Exact says when one stopped early. Check, CheckGroups and
// Preempt (and gang/queue's passes) take a context and stop soon after it
// is cancelled.
//
// Every error wraps a sentinel (ErrInvalidJob, ErrInvalidSnapshot,
// ErrInvalidPlacement, ErrParse, ErrInternal, or the context's error),
// and Result.Err wraps one of ErrPipelined,
// ErrBlocked, ErrFragmented, ErrNeverFits. The package builds with
// CGO_ENABLED=0 and imports no provider.
package gang
