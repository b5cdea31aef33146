package gang

// Changing a snapshot: Clone, Assume, Add, RemovePod and RemoveJob (each
// ends with tidy, in snapshot_tidy.go).

import (
	"fmt"
	"slices"
)

// Clone returns an independent copy; static data, per-node usage and the
// cache of what planning calls worked out are shared until changed. When
// that cache has grown past its limits (see the Limits: a snapshot that
// answered many calls for pods of many shapes), the copy starts a fresh
// one holding its own nodes' usage patterns, with the same answers; so a
// scheduler that keeps a snapshot and plans on it bounds its memory by
// keeping Clone's copy in its place now and then.
func (s *Snapshot) Clone() *Snapshot {
	c := s.clone()
	if c != nil {
		c.tidy()
	}
	return c
}

// clone is Clone sharing the cache whatever its size, for the passes that
// plan on a copy with a solver that holds class ids of the original's
// cache.
func (s *Snapshot) clone() *Snapshot {
	if s == nil {
		return nil
	}
	c := *s
	c.allocs = slices.Clone(s.allocs)
	c.live = slices.Clone(s.live)
	c.byNode = make([][]int32, len(s.byNode))
	for i, b := range s.byNode {
		c.byNode[i] = slices.Clone(b)
	}
	c.byJob = make(map[string][]int32, len(s.byJob))
	for j, b := range s.byJob {
		c.byJob[j] = slices.Clone(b)
	}
	c.usage = slices.Clone(s.usage)
	c.warn = slices.Clone(s.warn)
	return &c
}

// RemoveJob removes every pod of the named job (it ended, or was evicted or
// released) and returns how many there were.
func (s *Snapshot) RemoveJob(job string) int {
	if s == nil {
		return 0
	}
	n := s.removeJob(job)
	if n > 0 {
		s.tidy()
	}
	return n
}

// removeJob is RemoveJob without tidy, for the passes that remove jobs
// from their working copy while their solver holds its class ids.
func (s *Snapshot) removeJob(job string) int {
	ks := s.byJob[job]
	if len(ks) == 0 {
		return 0
	}
	touched := map[int]bool{}
	n := 0
	for _, k := range ks {
		if !s.live[k] {
			continue
		}
		s.live[k] = false
		s.nlive--
		n++
		ni, _ := s.cluster.NodeIndex(s.allocs[k].Node)
		touched[ni] = true
	}
	delete(s.byJob, job)
	s.dropRemoved(touched)
	return n
}

// Assume records the pods of placement p for job j as running, after
// checking p with Validate. On error nothing changes.
func (s *Snapshot) Assume(j *Job, p *Placement) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.Validate(j, p); err != nil {
		return err
	}
	s.assume(j, p)
	s.tidy()
	return nil
}

// dropRemoved forgets the removed pods of the touched nodes and recounts
// their usage.
func (s *Snapshot) dropRemoved(touched map[int]bool) {
	for ni := range touched {
		s.byNode[ni] = slices.DeleteFunc(s.byNode[ni], func(k int32) bool { return !s.live[k] })
		u, err := s.buildUsage(ni, s.byNode[ni])
		if err != nil {
			// Removing pods cannot make a valid usage invalid.
			panic(fmt.Sprintf("gang: rebuilding node usage after a removal: %v", err))
		}
		s.usage[ni] = u
	}
}

// assume adds a validated placement's pods.
func (s *Snapshot) assume(j *Job, p *Placement) {
	touched := map[int]bool{}
	for _, pp := range p.Pods {
		a := Allocation{Job: j.Name, Set: pp.Set, Pod: pp.Name, Node: pp.Node, Devices: slices.Clone(pp.Devices),
			MIG: slices.Clone(pp.MIG), CPUMilli: pp.CPUMilli, MemoryBytes: pp.MemoryBytes,
			Priority: j.Priority, Queue: j.Queue, Remaining: j.RunTime}
		if pp.Shared != nil {
			sl := *pp.Shared
			a.Shared = &sl
		}
		s.addAlloc(a)
		ni, _ := s.cluster.NodeIndex(pp.Node)
		touched[ni] = true
	}
	for ni := range touched {
		u, err := s.buildUsage(ni, s.byNode[ni])
		if err != nil {
			panic(fmt.Sprintf("gang: assuming a validated placement: %v", err))
		}
		s.usage[ni] = u
	}
}

// heldStillValid reports whether hold, a view with a reservation held,
// survives pl's start on s: it does unless pl lands on a node the view
// holds differently (a nil hold stays nil).
func heldStillValid(hold *view, s *Snapshot, pl *Placement) bool {
	if hold == nil || hold.over == nil {
		return true
	}
	for _, name := range pl.Nodes() {
		if ni, _ := s.cluster.NodeIndex(name); hold.over[ni] != nil {
			return false
		}
	}
	return true
}

// Add records running pods (a scheduler's informer saw them bound), all or
// nothing: on error (an unknown node or device, a device or MIG slot
// already held, CPU or memory over capacity) nothing changes.
func (s *Snapshot) Add(allocs ...Allocation) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(allocs) > MaxAllocations-s.nlive {
		return limitErr(ErrInvalidSnapshot, "%d running pods and %d more are more than MaxAllocations (%d)", s.nlive, len(allocs), MaxAllocations)
	}
	n0 := len(s.allocs)
	touched := map[int][]int32{}
	var added []Allocation
	for i := range allocs {
		a, err := s.checkAlloc(&allocs[i], i)
		if err != nil {
			return err
		}
		added = append(added, a)
	}
	for i, a := range added {
		ni, _ := s.cluster.NodeIndex(a.Node)
		if touched[ni] == nil {
			touched[ni] = slices.Clone(s.byNode[ni])
		}
		touched[ni] = append(touched[ni], int32(n0+i))
	}
	s.allocs = append(s.allocs, added...)
	usage := map[int]*nodeUsage{}
	for ni, keys := range touched {
		u, err := s.buildUsage(ni, keys)
		if err != nil {
			s.allocs = s.allocs[:n0]
			return err
		}
		usage[ni] = u
	}
	s.allocs = s.allocs[:n0]
	for _, a := range added {
		s.addAlloc(a)
	}
	for ni, u := range usage {
		s.usage[ni] = u
	}
	s.tidy()
	return nil
}

// RemovePod removes the pods named pod (it ended or was deleted) and
// returns how many there were.
func (s *Snapshot) RemovePod(pod string) int {
	if s == nil {
		return 0
	}
	touched := map[int]bool{}
	n := 0
	for ni, ks := range s.byNode {
		for _, k := range ks {
			if s.allocs[k].Pod == pod {
				s.live[k] = false
				s.nlive--
				touched[ni] = true
				n++
			}
		}
	}
	s.dropRemoved(touched)
	for j, ks := range s.byJob {
		ks = slices.DeleteFunc(ks, func(k int32) bool { return !s.live[k] })
		if len(ks) == 0 {
			delete(s.byJob, j)
		} else {
			s.byJob[j] = ks
		}
	}
	if n > 0 {
		s.tidy()
	}
	return n
}
