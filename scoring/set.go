package scoring

import (
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// MaxDevices is the largest device count a node may have for scoring.
const MaxDevices = 256

// DeviceSet is a set of device indices of one node (0..MaxDevices-1), a small
// comparable value type: copying it copies the set, and it allocates nothing.
// The zero value is the empty set.
type DeviceSet struct {
	w [MaxDevices / 64]uint64
}

// NewDeviceSet returns the set holding the given indices; indices outside
// 0..MaxDevices-1 are ignored.
func NewDeviceSet(indices ...int) DeviceSet {
	var s DeviceSet
	for _, i := range indices {
		s = s.With(i)
	}
	return s
}

// With returns s plus device i (s itself when i is out of range).
func (s DeviceSet) With(i int) DeviceSet {
	if i >= 0 && i < MaxDevices {
		s.w[i>>6] |= 1 << (uint(i) & 63)
	}
	return s
}

// Without returns s minus device i.
func (s DeviceSet) Without(i int) DeviceSet {
	if i >= 0 && i < MaxDevices {
		s.w[i>>6] &^= 1 << (uint(i) & 63)
	}
	return s
}

// Contains reports whether device i is in s.
func (s DeviceSet) Contains(i int) bool {
	return i >= 0 && i < MaxDevices && s.w[i>>6]&(1<<(uint(i)&63)) != 0
}

// Len returns the number of devices in s.
func (s DeviceSet) Len() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether s holds no device.
func (s DeviceSet) IsEmpty() bool { return s == DeviceSet{} }

// Union returns the devices in s or t.
func (s DeviceSet) Union(t DeviceSet) DeviceSet {
	for i := range s.w {
		s.w[i] |= t.w[i]
	}
	return s
}

// Intersect returns the devices in both s and t.
func (s DeviceSet) Intersect(t DeviceSet) DeviceSet {
	for i := range s.w {
		s.w[i] &= t.w[i]
	}
	return s
}

// Difference returns the devices in s but not in t.
func (s DeviceSet) Difference(t DeviceSet) DeviceSet {
	for i := range s.w {
		s.w[i] &^= t.w[i]
	}
	return s
}

// SubsetOf reports whether every device of s is in t.
func (s DeviceSet) SubsetOf(t DeviceSet) bool {
	for i := range s.w {
		if s.w[i]&^t.w[i] != 0 {
			return false
		}
	}
	return true
}

// All iterates over the devices of s in ascending order.
func (s DeviceSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for wi, w := range s.w {
			for w != 0 {
				b := bits.TrailingZeros64(w)
				if !yield(wi<<6 | b) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// AppendTo appends the devices of s in ascending order to dst.
func (s DeviceSet) AppendTo(dst []int) []int {
	for i := range s.All() {
		dst = append(dst, i)
	}
	return dst
}

// Indices returns the devices of s in ascending order (nil for the empty set).
func (s DeviceSet) Indices() []int {
	if s.IsEmpty() {
		return nil
	}
	return s.AppendTo(make([]int, 0, s.Len()))
}

// String formats s as "{0,3,5}".
func (s DeviceSet) String() string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for i := range s.All() {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Itoa(i))
	}
	b.WriteByte('}')
	return b.String()
}

// lowBits returns the first 64 devices as a mask (callers use it only when
// the node has at most 64 devices).
func (s DeviceSet) lowBits() uint64 { return s.w[0] }

func setFromMask(m uint64) DeviceSet {
	var s DeviceSet
	s.w[0] = m
	return s
}
