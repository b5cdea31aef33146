package gang

import (
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// Size limits. Every API entry point (and the file parsers of package
// gangfile, which has its own MaxFileBytes) checks them
// before allocating anything that grows with the size asked for, so a
// small hostile input (a node template with "count: 1000000000", a job of
// a billion pods, a YAML alias bomb) is refused quickly with an error that
// wraps topology.ErrLimit and names the limit, instead of costing memory
// in proportion to the number it names.
const (
	// MaxNodes bounds the nodes of a snapshot (NewSnapshot, and a cluster
	// file after its node templates are expanded).
	MaxNodes = 1 << 16
	// MaxLabels bounds the labels of one node (and the keys of a node
	// selector).
	MaxLabels = 256
	// MaxLevels bounds the levels of a cluster tree: label levels of a
	// cluster file, HyperNode tiers.
	MaxLevels = 16
	// MaxNameBytes bounds every name a file or a job carries: job, pod set,
	// queue, pod and node names, label keys and values, level names, MIG
	// profile names.
	MaxNameBytes = 512
	// MaxJobs bounds the jobs of a job file and of one PlanQueue call, and
	// the queues of either.
	MaxJobs = 4096
	// maxQueueWork bounds one PlanQueue pass: its jobs times the
	// snapshot's nodes (each job costs at least one search over the nodes):
	// 512 jobs on 65,536 nodes, 4,096 jobs on 8,192.
	maxQueueWork = 1 << 25
	// MaxJobPods bounds the pods of one job (the sum of its pod sets'
	// replicas).
	MaxJobPods = 1 << 16
	// MaxPodSets bounds the pod sets of one job (the Kubernetes Workload
	// API allows 8 pod groups).
	MaxPodSets = 16
	// MaxAllocations bounds the running pods of a snapshot (NewSnapshot,
	// Snapshot.Add, a cluster file's allocations).
	MaxAllocations = 1 << 20
	// MaxBytes bounds every memory quantity: a pod's memory and GPU
	// memory, a node's allocatable memory, an allocation's memory (64 TiB).
	// With MaxJobPods it keeps every sum inside int64.
	MaxBytes = 1 << 46
	// MaxCPUMilli bounds every CPU quantity, in thousandths of a core
	// (about a billion cores).
	MaxCPUMilli = 1 << 40
	// MaxPriority bounds the magnitude of job and allocation priorities
	// (Kubernetes priorities are 32-bit), so priority sums never overflow.
	MaxPriority = 1<<31 - 1
	// maxWarnings bounds Snapshot.Warnings: the first maxWarnings, then one
	// line saying how many more there were.
	maxWarnings = 100
)

// limitErr returns an error wrapping sentinel (ErrParse, ErrInvalidJob,
// ErrInvalidSnapshot) and topology.ErrLimit.
func limitErr(sentinel error, format string, a ...any) error {
	return fmt.Errorf("%w: %w: %s", sentinel, topology.ErrLimit, fmt.Sprintf(format, a...))
}

// nameErr checks a name's length.
func checkName(sentinel error, what, s string) error {
	if len(s) > MaxNameBytes {
		return limitErr(sentinel, "%s is %d bytes long, more than MaxNameBytes (%d)", what, len(s), MaxNameBytes)
	}
	return nil
}

// satAdd adds b to a, saturating at the largest int64.
func satAdd(a, b int64) int64 {
	if b > 0 && a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}

// satAddU adds b to a, saturating at the largest uint64.
func satAddU(a, b uint64) uint64 {
	if a+b < a {
		return 1<<64 - 1
	}
	return a + b
}
