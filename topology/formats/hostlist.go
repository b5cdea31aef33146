package formats

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// maxHostlistNames bounds how many names [ExpandHostlist] produces (the
// cluster limit, [topology.MaxClusterNodes]).
const maxHostlistNames = topology.MaxClusterNodes

// maxHostlistBytes bounds the length of a hostlist expression
// [ExpandHostlist] reads.
const maxHostlistBytes = 1 << 20

type hostName struct {
	prefix string
	digits string // "" when the name has no numeric suffix
	num    uint64
}

func splitHost(s string) hostName {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	h := hostName{prefix: s[:i], digits: s[i:]}
	if h.digits != "" {
		n, err := strconv.ParseUint(h.digits, 10, 64)
		if err != nil || len(h.digits) > 18 { // too long for a range: keep literal
			return hostName{prefix: s}
		}
		h.num = n
	}
	return h
}

// needsLiteral reports whether s holds characters that have a meaning in a
// hostlist expression, so it cannot be a member of a bracketed range.
func needsLiteral(s string) bool { return strings.ContainsAny(s, "[],") }

// CompressHostlist writes names as a Slurm hostlist expression:
// "node01,node02,node03,node07,gpu-a" becomes "gpu-a,node[01-03,07]".
// Names sharing a prefix and a numeric suffix (unpadded, or zero-padded to
// one width) form a bracketed range list; other names are written as they
// are. Groups are ordered by
// prefix, then width; numbers ascend. Duplicates are written once. The
// result expands back to the same set with [ExpandHostlist].
func CompressHostlist(names []string) string {
	type key struct {
		prefix string
		width  int
	}
	groups := map[key][]uint64{}
	var literal []string
	var plain []hostName
	for _, s := range names {
		h := splitHost(s)
		if h.digits == "" || needsLiteral(h.prefix) {
			literal = append(literal, s)
			continue
		}
		if len(h.digits) > 1 && h.digits[0] == '0' {
			k := key{h.prefix, len(h.digits)} // zero-padded: one group per width
			groups[k] = append(groups[k], h.num)
		} else {
			plain = append(plain, h)
		}
	}
	// An unpadded number as long as a padded group's width joins that
	// group ("n09", "n10" → "n[09-10]"); the rest share one unpadded group.
	for _, h := range plain {
		k := key{h.prefix, len(h.digits)}
		if _, ok := groups[k]; !ok {
			k.width = 0
		}
		groups[k] = append(groups[k], h.num)
	}
	type group struct {
		key
		nums []uint64
	}
	var all []group
	for k, nums := range groups {
		slices.Sort(nums)
		all = append(all, group{k, slices.Compact(nums)})
	}
	slices.SortFunc(all, func(a, b group) int {
		if c := strings.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return a.width - b.width
	})
	slices.Sort(literal)
	literal = slices.Compact(literal)
	parts := literal
	for _, g := range all {
		format := func(n uint64) string { return fmt.Sprintf("%0*d", g.width, n) }
		if len(g.nums) == 1 {
			parts = append(parts, g.prefix+format(g.nums[0]))
			continue
		}
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] == g.nums[j]+1 {
				j++
			}
			if j == i {
				ranges = append(ranges, format(g.nums[i]))
			} else {
				ranges = append(ranges, format(g.nums[i])+"-"+format(g.nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, g.prefix+"["+strings.Join(ranges, ",")+"]")
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// ExpandHostlist expands a Slurm hostlist expression ("node[01-03,07],gpu-a")
// into its names, in the order written. It reads one bracket per item
// (prefix[ranges]suffix). More than [topology.MaxClusterNodes] names, or
// an expression longer than 1 MiB, fail with an error wrapping
// [topology.ErrLimit] before the names are produced (the limits
// maxHostlistNames and maxHostlistBytes in the package's Limits table);
// malformed expressions fail with an error wrapping [topology.ErrParse].
func ExpandHostlist(expr string) ([]string, error) {
	if len(expr) > maxHostlistBytes {
		return nil, fmt.Errorf("formats: hostlist of %d bytes, more than formats limit maxHostlistBytes (%d): %w", len(expr), maxHostlistBytes, topology.ErrLimit)
	}
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
		if depth < 0 || depth > 1 {
			return nil, fmt.Errorf("formats: hostlist %q: unbalanced or nested brackets: %w", expr, topology.ErrParse)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("formats: hostlist %q: unbalanced brackets: %w", expr, topology.ErrParse)
	}
	items = append(items, expr[start:])
	type rng struct{ lo, hi uint64 }
	type item struct {
		prefix, suffix string
		width          int
		ranges         []rng
	}
	parsed := make([]item, 0, len(items))
	total := uint64(0)
	for _, it := range items {
		if it == "" {
			return nil, fmt.Errorf("formats: hostlist %q: empty name: %w", expr, topology.ErrParse)
		}
		open := strings.IndexByte(it, '[')
		if open < 0 {
			if strings.ContainsRune(it, ']') {
				return nil, fmt.Errorf("formats: hostlist item %q: stray ']': %w", it, topology.ErrParse)
			}
			parsed = append(parsed, item{prefix: it})
			total++
			continue
		}
		closeAt := strings.IndexByte(it, ']')
		p := item{prefix: it[:open], suffix: it[closeAt+1:], width: -1}
		if strings.ContainsAny(p.suffix, "[]") {
			return nil, fmt.Errorf("formats: hostlist item %q: more than one bracket: %w", it, topology.ErrParse)
		}
		for _, r := range strings.Split(it[open+1:closeAt], ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, errA := strconv.ParseUint(lo, 10, 64)
			b, errB := strconv.ParseUint(hi, 10, 64)
			if errA != nil || errB != nil || a > b || len(lo) > 18 || len(hi) > 18 {
				return nil, fmt.Errorf("formats: hostlist item %q: bad range %q: %w", it, r, topology.ErrParse)
			}
			w := 0
			if len(lo) > 1 && lo[0] == '0' {
				w = len(lo)
			}
			if p.width < 0 || w > p.width {
				p.width = max(w, 0)
			}
			p.ranges = append(p.ranges, rng{a, b})
			total += b - a + 1
			if total > maxHostlistNames {
				return nil, fmt.Errorf("formats: hostlist %q names more than formats limit maxHostlistNames (%d): %w", expr, maxHostlistNames, topology.ErrLimit)
			}
		}
		parsed = append(parsed, p)
	}
	out := make([]string, 0, total)
	for _, p := range parsed {
		if p.ranges == nil {
			out = append(out, p.prefix)
			continue
		}
		for _, r := range p.ranges {
			for n := r.lo; ; n++ {
				out = append(out, fmt.Sprintf("%s%0*d%s", p.prefix, p.width, n, p.suffix))
				if n == r.hi {
					break
				}
			}
		}
	}
	return out, nil
}
