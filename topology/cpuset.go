package topology

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// errBadCPUList is wrapped by every error [ParseCPUSet] and [NewCPUSet]
// return. It wraps [ErrParse].
var errBadCPUList = fmt.Errorf("topology: malformed cpulist: %w", ErrParse)

// maxCPU bounds the CPU ids a CPUSet accepts, so that hostile input such as
// "0-999999999" cannot make the parser allocate gigabytes.
const maxCPU = 1 << 16

// CPUSet is an immutable set of logical CPU ids, parsed from and formatted as
// the Linux cpulist syntax ("0-19,40-59"). The zero value is the empty set,
// which also stands for "affinity unknown".
type CPUSet struct {
	words []uint64 // never mutated after construction
}

// NewCPUSet returns the set holding the given CPU ids. Negative ids and ids of
// 65536 or more are rejected.
func NewCPUSet(cpus ...int) (CPUSet, error) {
	var w []uint64
	for _, c := range cpus {
		if c < 0 || c >= maxCPU {
			return CPUSet{}, fmt.Errorf("%w: cpu %d out of range [0,%d)", errBadCPUList, c, maxCPU)
		}
		w = setBit(w, c)
	}
	return CPUSet{words: trim(w)}, nil
}

// ParseCPUSet parses a Linux cpulist such as "0-19,40-59" or "3". The empty
// string and "N/A" (as printed by nvidia-smi) parse to the empty set. CPU
// ids must be below 65536. The cost is linear in the length of s (ranges
// are merged before bits are set), however the ranges overlap.
func ParseCPUSet(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "N/A") {
		return CPUSet{}, nil
	}
	var buf [8][2]int
	ranges := buf[:0]
	sorted, hi := true, -1
	for part := range strings.SplitSeq(s, ",") {
		lo, top, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= maxCPU {
			return CPUSet{}, fmt.Errorf("%w: %q: bad cpu %q", errBadCPUList, s, lo)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(top)
			if err != nil || b < a || b >= maxCPU {
				return CPUSet{}, fmt.Errorf("%w: %q: bad range %q", errBadCPUList, s, part)
			}
		}
		if a <= hi {
			sorted = false
		}
		hi = max(hi, b)
		ranges = append(ranges, [2]int{a, b})
	}
	if !sorted {
		slices.SortFunc(ranges, func(x, y [2]int) int { return cmp.Compare(x[0], y[0]) })
	}
	w := make([]uint64, hi/64+1)
	end := -1 // highest CPU set so far; ranges are merged against it
	for _, r := range ranges {
		a, b := max(r[0], end+1), r[1]
		if a > b {
			continue
		}
		setRange(w, a, b)
		end = b
	}
	return CPUSet{words: trim(w)}, nil
}

// setRange sets bits a..b (inclusive) of w, a word at a time.
func setRange(w []uint64, a, b int) {
	for a <= b {
		i, off := a/64, a%64
		n := min(64-off, b-a+1)
		mask := ^uint64(0)
		if n < 64 {
			mask = (1<<n - 1) << off
		}
		w[i] |= mask
		a += n
	}
}

func setBit(w []uint64, c int) []uint64 {
	for len(w) <= c/64 {
		w = append(w, 0)
	}
	w[c/64] |= 1 << (c % 64)
	return w
}

func trim(w []uint64) []uint64 {
	for len(w) > 0 && w[len(w)-1] == 0 {
		w = w[:len(w)-1]
	}
	if len(w) == 0 {
		return nil
	}
	return w
}

// IsEmpty reports whether the set holds no CPU.
func (s CPUSet) IsEmpty() bool { return len(s.words) == 0 }

// Count returns the number of CPUs in the set.
func (s CPUSet) Count() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Contains reports whether cpu is in the set.
func (s CPUSet) Contains(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.words) {
		return false
	}
	return s.words[cpu/64]&(1<<(cpu%64)) != 0
}

// CPUs returns the ids in ascending order.
func (s CPUSet) CPUs() []int {
	out := make([]int, 0, s.Count())
	for i, w := range s.words {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// Equal reports whether s and t hold the same CPUs.
func (s CPUSet) Equal(t CPUSet) bool {
	if len(s.words) != len(t.words) {
		return false
	}
	for i := range s.words {
		if s.words[i] != t.words[i] {
			return false
		}
	}
	return true
}

// Intersects reports whether s and t share a CPU.
func (s CPUSet) Intersects(t CPUSet) bool {
	for i := 0; i < len(s.words) && i < len(t.words); i++ {
		if s.words[i]&t.words[i] != 0 {
			return true
		}
	}
	return false
}

// String formats the set in cpulist syntax with ranges ("0-19,40-59"); the
// empty set formats as "".
func (s CPUSet) String() string {
	var b strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// MarshalText implements encoding.TextMarshaler.
func (s CPUSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *CPUSet) UnmarshalText(b []byte) error {
	p, err := ParseCPUSet(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}
