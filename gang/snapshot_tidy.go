package gang

// A snapshot kept for a long time and updated as pods start and end (Assume,
// Add, RemovePod, RemoveJob) would otherwise grow with every pod it ever
// saw: removed allocations stay in its table (marked dead), and its cache
// keeps a class for every usage pattern any node ever had, or any search
// tried, with the pod sequences worked out on it (about 7.5 KB a class),
// and on each class a sequence for every pod shape ever checked (about
// 1.2 KB each: a pod of its own MinFreeMemory is a shape of its own, so a
// snapshot with few classes still grows with the shapes it is asked about).
// tidy, run at the end of each of those calls and on Clone's copy, bounds
// all of it by what the snapshot holds now. (Planning calls grow the cache too,
// with the usage patterns their searches try; a snapshot only read is
// tidied through its Clone.)

// The limits are variables so that tests can lower them.
var (
	// tidyDeadAllocations is the number of removed allocations a snapshot
	// keeps before it compacts its table (and at least as many as it has
	// live ones, so that compaction costs O(1) per removal).
	tidyDeadAllocations = 1024
	// tidyCacheClasses is the number of cached classes (usage patterns) a
	// snapshot's cache holds before the snapshot starts a fresh cache with
	// the classes of its nodes only (and at least tidyCacheClassesPerNode
	// per node, so that starting one costs O(1) per class cached).
	tidyCacheClasses        = 32
	tidyCacheClassesPerNode = 2
	// tidyCacheSequences is the number of greedy sequences (one per class
	// and pod shape) a snapshot's cache holds before the snapshot starts a
	// fresh cache, and at least tidyCacheSequencesPerNode per node.
	tidyCacheSequences        = 128
	tidyCacheSequencesPerNode = 4
)

// tidy compacts the allocation table and starts a fresh cache when they
// hold more than the limits above beyond what the snapshot needs. Answers
// do not change: the allocations keep their order, and the fresh cache
// interns the nodes in the order NewSnapshot does, so the snapshot is as
// one built anew from its allocations. Clones sharing the old cache keep
// it. Only the exported mutators and Clone call it, never a planner in a
// pass (whose solver holds class ids of the cache it started with).
func (s *Snapshot) tidy() {
	if s.cache == nil {
		return // a zero Snapshot
	}
	if dead := len(s.allocs) - s.nlive; dead > max(tidyDeadAllocations, s.nlive) {
		s.compactAllocations()
	}
	if s.cache.classCount() > max(tidyCacheClasses, tidyCacheClassesPerNode*len(s.nodes)) ||
		s.cache.seqCount() > max(tidyCacheSequences, tidyCacheSequencesPerNode*len(s.nodes)) {
		s.freshCache()
	}
}

// compactAllocations drops the removed allocations from the table,
// renumbering the live ones in their order in byNode and byJob.
func (s *Snapshot) compactAllocations() {
	renumber := make([]int32, len(s.allocs))
	allocs := make([]Allocation, 0, s.nlive)
	for k := range s.allocs {
		renumber[k] = -1
		if s.live[k] {
			renumber[k] = int32(len(allocs))
			allocs = append(allocs, s.allocs[k])
		}
	}
	keep := func(keys []int32) []int32 {
		out := make([]int32, 0, len(keys))
		for _, k := range keys {
			if renumber[k] >= 0 {
				out = append(out, renumber[k])
			}
		}
		return out
	}
	for n, keys := range s.byNode {
		s.byNode[n] = keep(keys)
	}
	for job, keys := range s.byJob {
		s.byJob[job] = keep(keys)
	}
	s.allocs = allocs
	s.live = make([]bool, len(allocs))
	for k := range s.live {
		s.live[k] = true
	}
}

// freshCache gives the snapshot a new cache holding the classes of its
// nodes' idle and current usages, interned in NewSnapshot's order.
func (s *Snapshot) freshCache() {
	fresh := newCache()
	intern := func(n int, u *nodeUsage) *nodeUsage {
		again := *u
		again.class, again.free, again.freeMIG = fresh.intern(&s.nodes[n], &again)
		return &again
	}
	idle := make([]*nodeUsage, len(s.idle))
	for n, u := range s.idle {
		idle[n] = intern(n, u)
	}
	usage := make([]*nodeUsage, len(s.usage))
	for n, u := range s.usage {
		if u == s.idle[n] {
			usage[n] = idle[n] // still shared with idle
			continue
		}
		usage[n] = intern(n, u)
	}
	s.cache, s.idle, s.usage = fresh, idle, usage
}
