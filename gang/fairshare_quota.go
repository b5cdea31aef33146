package gang

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// demandAmounts is what a pending job's thresholds ask for.
func demandAmounts(p *problem) queuepass.Amounts {
	out := queuepass.Amounts{}
	for _, sp := range p.sets {
		n := sp.need
		if n == 0 {
			n = sp.want
		}
		if sp.gpuUnits > 0 {
			out[queuepass.ResourceGPU] += n * sp.gpuUnits
			out[queuepass.ResourceGPUMemory] += n * sp.gpuUnits * int64(sp.shape.mem)
		}
		if sp.shape.shared {
			out[queuepass.ResourceGPUMemory] += n * int64(sp.shape.shMem)
		}
		if sp.shape.migN > 0 {
			out[queuepass.ResourceMIGPrefix+sp.shape.profile.String()] += n * int64(sp.shape.migN)
		}
	}
	return out
}

// allocAmounts is what one running pod holds.
func (s *Snapshot) allocAmounts(a *Allocation, add func(r string, v int64)) {
	ni, ok := s.cluster.NodeIndex(a.Node)
	if !ok {
		return
	}
	st := &s.nodes[ni]
	for _, d := range a.Devices {
		if a.Shared != nil {
			add(queuepass.ResourceGPUMemory, int64(a.Shared.MemoryBytes))
			continue
		}
		add(queuepass.ResourceGPU, 1)
		if d >= 0 && d < st.devices {
			add(queuepass.ResourceGPUMemory, int64(min(st.topo.Device(d).MemoryBytes, MaxBytes)))
		}
	}
	for _, m := range a.MIG {
		add(queuepass.ResourceMIGPrefix+m.Profile, 1)
	}
}

// addUp adds v of resource r to queue q and its ancestors.
func addUp(q *queueState, r string, v int64, field func(*queueState) queuepass.Amounts) {
	for x := q; x != nil; x = x.parent {
		field(x)[r] += v
	}
}

func (fp *fairPass) usage() {
	for k := range fp.input.allocs {
		if !fp.input.live[k] {
			continue
		}
		a := &fp.input.allocs[k]
		q := fp.queues[a.Queue]
		if q == nil {
			continue
		}
		fp.input.allocAmounts(a, func(r string, v int64) {
			addUp(q, r, v, func(x *queueState) queuepass.Amounts { return x.usage })
			addUp(q, r, v, func(x *queueState) queuepass.Amounts { return x.demand })
		})
	}
	for _, q := range fp.queues {
		for _, j := range q.pending {
			for r, v := range fp.demands[j.Name] {
				addUp(q, r, v, func(x *queueState) queuepass.Amounts { return x.demand })
			}
		}
	}
	if hl := fp.settings.HalfLife; hl > 0 {
		for _, h := range fp.settings.History {
			q := fp.queues[h.Queue]
			if q == nil {
				continue
			}
			f := math.Exp2(-float64(h.Age) / float64(hl))
			for r, v := range h.Used {
				for x := q; x != nil; x = x.parent {
					x.decayedUsage[r] += float64(v) * f
				}
			}
		}
	}
}

// capacity is what the cluster offers per resource (schedulable nodes,
// healthy devices not in MIG mode); MIG profiles count their demand.
func (fp *fairPass) capacity() queuepass.Amounts {
	out := queuepass.Amounts{}
	for n := range fp.input.nodes {
		st := &fp.input.nodes[n]
		if st.info.Unschedulable {
			continue
		}
		for d := range st.devices {
			if st.healthy[d] && !st.migOn[d] {
				out[queuepass.ResourceGPU]++
				out[queuepass.ResourceGPUMemory] += int64(min(st.topo.Device(d).MemoryBytes, MaxBytes))
			}
		}
	}
	for _, q := range fp.roots {
		for r, v := range q.demand {
			if strings.HasPrefix(r, queuepass.ResourceMIGPrefix) {
				out[r] += v
			}
		}
	}
	return out
}

// fairShares divides capacity down the tree: deserved first (scaled down
// when over-committed), the rest by over-quota weight (water-filling), up
// to demand and limit.
func (fp *fairPass) fairShares() {
	var divide func(kids []*queueState, c queuepass.Amounts)
	divide = func(kids []*queueState, c queuepass.Amounts) {
		res := map[string]bool{}
		for r := range c {
			res[r] = true
		}
		for _, q := range kids {
			for r := range q.demand {
				res[r] = true
			}
		}
		for r := range res {
			total := float64(c[r])
			want := make([]float64, len(kids))
			got := make([]float64, len(kids))
			var sumDes float64
			for i, q := range kids {
				want[i] = float64(q.demand[r])
				if l := q.spec.Limit[r]; l > 0 {
					want[i] = min(want[i], float64(l))
				}
				sumDes += min(float64(q.spec.Deserved[r]), want[i])
			}
			scale := 1.0
			if sumDes > total && sumDes > 0 {
				scale = total / sumDes
			}
			left := total
			for i, q := range kids {
				got[i] = min(float64(q.spec.Deserved[r]), want[i]) * scale
				left -= got[i]
			}
			for left > 1e-9 {
				var wsum float64
				for i, q := range kids {
					if got[i] < want[i]-1e-9 {
						wsum += weightOf(q, r)
					}
				}
				if wsum == 0 {
					break
				}
				used := 0.0
				for i, q := range kids {
					if got[i] < want[i]-1e-9 {
						give := min(left*weightOf(q, r)/wsum, want[i]-got[i])
						got[i] += give
						used += give
					}
				}
				left -= used
				if used < 1e-9 {
					break
				}
			}
			for i, q := range kids {
				q.fairShare[r] = int64(math.Round(got[i]))
			}
		}
		for _, q := range kids {
			divide(q.children, q.fairShare)
		}
	}
	divide(fp.roots, fp.capacity())
}

func weightOf(q *queueState, r string) float64 {
	if w, ok := q.spec.OverQuotaWeight[r]; ok {
		return w
	}
	return 1
}

// inQuota says whether queue q stays within its deserved quota with d
// more (every resource d asks for that q has a deserved quota for; at
// least one).
func inQuota(q *queueState, d queuepass.Amounts) bool {
	any := false
	for r, v := range d {
		des, ok := q.spec.Deserved[r]
		if v <= 0 || !ok {
			continue // a resource the queue has no quota for does not count
		}
		any = true
		if q.usage[r]+v > des {
			return false
		}
	}
	return any
}

// share is q's dominant share: the largest ratio of usage (plus decayed
// history) to fair share.
func share(q *queueState) float64 {
	var out float64
	for r, f := range q.fairShare {
		if f <= 0 {
			continue // no share of r: it does not rank the queue
		}
		out = max(out, (float64(q.usage[r])+q.decayedUsage[r])/float64(f))
	}
	return out
}

func belowDeserved(q *queueState) bool {
	for r, v := range q.spec.Deserved {
		if q.usage[r] < v {
			return true
		}
	}
	return false
}

func maps(a queuepass.Amounts) queuepass.Amounts {
	out := make(queuepass.Amounts, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

// overLimit names the first queue from q up that d would take over its
// limit ("" when none).
func overLimit(q *queueState, d queuepass.Amounts) string {
	for x := q; x != nil; x = x.parent {
		for r, v := range d {
			if l := x.spec.Limit[r]; l > 0 && x.usage[r]+v > l {
				return fmt.Sprintf("queue %s would exceed its %s limit (%d + %d > %d)", x.spec.Name, r, x.usage[r], v, l)
			}
		}
	}
	return ""
}

func (fp *fairPass) status() []queuepass.QueueStatus {
	var out []queuepass.QueueStatus
	names := make([]string, 0, len(fp.queues))
	for n := range fp.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		q := fp.queues[n]
		st := queuepass.QueueStatus{Name: n, Parent: q.spec.Parent, Deserved: q.spec.Deserved, Limit: q.spec.Limit,
			Usage: maps(q.usage), Demand: maps(q.demand), FairShare: maps(q.fairShare), DominantShare: share(q)}
		if q.reservation != nil {
			st.Reserved = q.reservation.job
		}
		out = append(out, st)
	}
	return out
}
