package gang

import (
	"math"
)

// order interleaves the queues: hierarchical DRF, in-quota first.
func (fp *fairPass) order(n int) []*Job {
	// ordering works on a copy of the usage: it grows as jobs are taken
	saved := map[*fq]Amounts{}
	for _, q := range fp.qs {
		saved[q] = maps(q.usage)
	}
	var out []*Job
	var pick func(kids []*fq) *fq
	pending := func(q *fq) bool {
		var has func(x *fq) bool
		has = func(x *fq) bool {
			if x.next < len(x.pending) {
				return true
			}
			for _, k := range x.kids {
				if has(k) {
					return true
				}
			}
			return false
		}
		return has(q)
	}
	headDemand := func(q *fq) Amounts {
		// the next job of q's subtree, taken as the queue's own next job
		// when it has one
		if q.next < len(q.pending) {
			return fp.need[q.pending[q.next].Name]
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
	ranks := map[*fq]rank{}
	rankOf := func(q *fq) rank {
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
	pick = func(kids []*fq) *fq {
		var best *fq
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
			if q.next < len(q.pending) {
				k := pick(q.kids)
				if k == nil || !(rankOf(k).share < rankOf(q).share) {
					break
				}
				q = k
				continue
			}
			k := pick(q.kids)
			if k == nil {
				break
			}
			q = k
		}
		j := q.pending[q.next]
		q.next++
		out = append(out, j)
		for r, v := range fp.need[j.Name] {
			addUp(q, r, v, func(x *fq) Amounts { return x.usage })
		}
		for x := q; x != nil; x = x.parent {
			delete(ranks, x)
		}
	}
	for _, q := range fp.qs {
		q.usage = saved[q]
	}
	return out
}
