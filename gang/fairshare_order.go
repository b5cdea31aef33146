package gang

import (
	"math"

	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// order interleaves the queues: hierarchical DRF, in-quota first.
func (fp *fairPass) order(n int) []*Job {
	// ordering works on a copy of the usage: it grows as jobs are taken
	saved := map[*queueState]queuepass.Amounts{}
	for _, q := range fp.queues {
		saved[q] = maps(q.usage)
	}
	var out []*Job
	var pick func(kids []*queueState) *queueState
	pending := func(q *queueState) bool {
		var has func(x *queueState) bool
		has = func(x *queueState) bool {
			if x.nextPending < len(x.pending) {
				return true
			}
			for _, k := range x.children {
				if has(k) {
					return true
				}
			}
			return false
		}
		return has(q)
	}
	headDemand := func(q *queueState) queuepass.Amounts {
		// the next job of q's subtree, taken as the queue's own next job
		// when it has one
		if q.nextPending < len(q.pending) {
			return fp.demands[q.pending[q.nextPending].Name]
		}
		return nil
	}
	// a queue's rank depends on its subtree only (its pending jobs, its
	// usage): kept until a job of its subtree is taken
	type rank struct {
		pending bool
		tier    int
		share   float64
	}
	ranks := map[*queueState]rank{}
	rankOf := func(q *queueState) rank {
		if r, ok := ranks[q]; ok {
			return r
		}
		r := rank{pending: pending(q), tier: 1, share: share(q)}
		if d := headDemand(q); d != nil && inQuota(q, d) {
			r.tier = 0
		} else if d == nil && belowDeserved(q) {
			r.tier = 0
		}
		ranks[q] = r
		return r
	}
	pick = func(kids []*queueState) *queueState {
		var best *queueState
		bestTier, bestShare := 2, math.Inf(1)
		for _, q := range kids {
			r := rankOf(q)
			if !r.pending {
				continue
			}
			if r.tier < bestTier || (r.tier == bestTier && r.share < bestShare) {
				best, bestTier, bestShare = q, r.tier, r.share
			}
		}
		return best
	}
	for len(out) < n {
		q := pick(fp.roots)
		if q == nil {
			break
		}
		for {
			// a queue's own jobs compete with its children as one more child
			if q.nextPending < len(q.pending) {
				k := pick(q.children)
				if k == nil || !(rankOf(k).share < rankOf(q).share) {
					break
				}
				q = k
				continue
			}
			k := pick(q.children)
			if k == nil {
				break
			}
			q = k
		}
		j := q.pending[q.nextPending]
		q.nextPending++
		out = append(out, j)
		for r, v := range fp.demands[j.Name] {
			addUp(q, r, v, func(x *queueState) queuepass.Amounts { return x.usage })
		}
		for x := q; x != nil; x = x.parent {
			delete(ranks, x)
		}
	}
	for _, q := range fp.queues {
		q.usage = saved[q]
	}
	return out
}
