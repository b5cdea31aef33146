package mig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxSlots is the largest number of memory-slice slots a model may have
// (real GPUs have 8, the A30 4).
const MaxSlots = 16

// Placement is the run of memory-slice slots [Start, Start+Size) a GPU
// instance occupies, as NVML's nvmlGpuInstancePlacement_t describes it. Two
// instances on one GPU conflict exactly when their placements overlap.
type Placement struct {
	// Start is the index of the first memory slice.
	Start int `json:"start"`
	// Size is the number of memory slices.
	Size int `json:"size"`
}

// End returns Start+Size, the first slot after the placement.
func (p Placement) End() int { return p.Start + p.Size }

// Overlaps reports whether p and q share a memory slice.
func (p Placement) Overlaps(q Placement) bool {
	return p.Size > 0 && q.Size > 0 && p.Start < q.End() && q.Start < p.End()
}

// Contains reports whether slot s lies inside p.
func (p Placement) Contains(s int) bool { return s >= p.Start && s < p.End() }

// String formats p the way `nvidia-smi mig -lgipp` does: "{4}:4".
func (p Placement) String() string { return fmt.Sprintf("{%d}:%d", p.Start, p.Size) }

// mask returns the slot bitmask of p (bit i = slot i). p must lie inside
// 0..MaxSlots.
func (p Placement) mask() uint32 {
	return ((uint32(1) << uint(p.Size)) - 1) << uint(p.Start)
}

// ProfileName is a parsed MIG profile name such as "3g.40gb", "1g.10gb+me"
// or "1c.3g.20gb". The "NNgb" part is the rounded memory size NVIDIA prints,
// not an exact capacity (see memoryGBForName). The zero value is invalid.
type ProfileName struct {
	// ComputeSlices is the compute-instance size for a compute-instance
	// profile ("1c.3g.20gb" has 1); 0 for a GPU-instance profile.
	ComputeSlices int
	// GPUSlices is the number of compute (SM) slices of the GPU instance:
	// the "3" of "3g.40gb".
	GPUSlices int
	// MemoryGB is the memory size in the name: the "40" of "3g.40gb".
	MemoryGB int
	// Suffix holds the attribute suffixes in canonical form: "", "+me",
	// "+me.all", "+gfx", "-me" (media extensions, all media extensions,
	// graphics, no media extensions), or a concatenation of such parts.
	Suffix string
}

// IsValid reports whether n is a well-formed name (not the zero value).
func (n ProfileName) IsValid() bool {
	return n.GPUSlices > 0 && n.MemoryGB > 0 && n.ComputeSlices >= 0 &&
		(n.ComputeSlices == 0 || n.ComputeSlices <= n.GPUSlices)
}

// String formats n as NVIDIA does: "3g.40gb", "1g.10gb+me", "1c.3g.20gb".
// The zero value formats as "".
func (n ProfileName) String() string {
	if !n.IsValid() {
		return ""
	}
	var b strings.Builder
	if n.ComputeSlices > 0 {
		b.WriteString(strconv.Itoa(n.ComputeSlices))
		b.WriteString("c.")
	}
	b.WriteString(strconv.Itoa(n.GPUSlices))
	b.WriteString("g.")
	b.WriteString(strconv.Itoa(n.MemoryGB))
	b.WriteString("gb")
	b.WriteString(n.Suffix)
	return b.String()
}

// MarshalText implements encoding.TextMarshaler.
func (n ProfileName) MarshalText() ([]byte, error) {
	return marshalText(n.IsValid(), n, errBadProfileName)
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseProfileName.
func (n *ProfileName) UnmarshalText(b []byte) error { return unmarshalText(n, b, ParseProfileName) }

// MustParseProfileName is ParseProfileName for names known to be good
// (literals in code and tests); it panics when s does not parse.
func MustParseProfileName(s string) ProfileName {
	n, err := ParseProfileName(s)
	if err != nil {
		panic(err)
	}
	return n
}

// maxNameLen bounds what ParseProfileName reads.
const maxNameLen = 64

// ParseProfileName parses a MIG profile name. It accepts the forms nvidia-smi
// and the Kubernetes device plugin print: "3g.40gb", "1g.10gb+me",
// "1g.24gb+me.all", "1g.24gb-me", "1c.3g.20gb", case-insensitively and with an
// optional "mig-" or "MIG " prefix ("nvidia.com/mig-1g.10gb" resource names
// without the domain). Errors wrap errBadProfileName and say what is wrong.
func ParseProfileName(s string) (ProfileName, error) {
	orig := s
	bad := func(why string) (ProfileName, error) {
		return ProfileName{}, fmt.Errorf("%w: %q: %s", errBadProfileName, orig, why)
	}
	if len(s) > maxNameLen {
		return bad("longer than 64 bytes")
	}
	s = strings.ToLower(strings.TrimSpace(s))
	for _, pre := range []string{"mig-", "mig "} {
		s = strings.TrimPrefix(s, pre)
	}
	var n ProfileName
	num := func() (int, bool) {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 4 || (i > 1 && s[0] == '0') {
			return 0, false
		}
		v, _ := strconv.Atoi(s[:i])
		s = s[i:]
		return v, true
	}
	v, ok := num()
	if !ok {
		return bad("want <n>g.<m>gb, e.g. 3g.40gb")
	}
	if strings.HasPrefix(s, "c.") {
		if v == 0 {
			return bad("compute-instance size must be positive")
		}
		n.ComputeSlices = v
		s = s[2:]
		if v, ok = num(); !ok {
			return bad("want <c>c.<n>g.<m>gb after the compute-instance size")
		}
	}
	if !strings.HasPrefix(s, "g.") {
		return bad("missing \"g.\" after the slice count")
	}
	n.GPUSlices = v
	s = s[2:]
	if n.MemoryGB, ok = num(); !ok {
		return bad("missing memory size after \"g.\"")
	}
	if !strings.HasPrefix(s, "gb") {
		return bad("memory size must end in \"gb\"")
	}
	s = s[2:]
	suffix, err := parseSuffix(s)
	if err != nil {
		return bad(err.Error())
	}
	n.Suffix = suffix
	if n.GPUSlices == 0 || n.MemoryGB == 0 {
		return bad("slice count and memory must be positive")
	}
	if n.ComputeSlices > n.GPUSlices {
		return bad("compute-instance size exceeds the GPU-instance size")
	}
	return n, nil
}

// parseSuffix validates a run of attribute parts such as "+me", "+me.all",
// "-me", "+gfx" and returns it in canonical form.
func parseSuffix(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	var b strings.Builder
	for s != "" {
		sign := s[0]
		if sign != '+' && sign != '-' {
			return "", fmt.Errorf("unexpected %q after the memory size", s)
		}
		s = s[1:]
		i := 0
		for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		part := s[:i]
		s = s[i:]
		if part == "" || part[0] == '.' || part[len(part)-1] == '.' || strings.Contains(part, "..") {
			return "", fmt.Errorf("empty or malformed attribute after %q", string(sign))
		}
		b.WriteByte(sign)
		b.WriteString(part)
	}
	return b.String(), nil
}

// memoryGBForName returns the "NNgb" figure NVIDIA prints in a profile name,
// by go-nvlib's rule: the profile's memory fraction of the device rounded up
// to eighths, times the device memory in whole GiB (rounded up), rounded.
// profileMiB is NVML's memorySizeMB (MiB); deviceBytes the GPU's memory.
// It returns 0 when either is 0.
func memoryGBForName(profileMiB, deviceBytes uint64) int {
	if profileMiB == 0 || deviceBytes == 0 {
		return 0
	}
	frac := float64(profileMiB) * (1 << 20) / float64(deviceBytes)
	eighths := math.Ceil(frac*8) / 8
	gib := math.Ceil(float64(deviceBytes) / (1 << 30))
	return int(math.Round(eighths * gib))
}

// Profile is one GPU-instance profile of one GPU model. Profile IDs are per
// model (ID 14 is 2g.10gb on an A100 but 1g.6gb on an A30): key profiles on
// (model, name) or (model, ID), never on the ID alone.
type Profile struct {
	// Name is the profile name ("3g.40gb").
	Name ProfileName `json:"name"`
	// ID is the profile ID nvidia-smi prints and NVML reports in
	// nvmlGpuInstanceProfileInfo.id; unique within the model only.
	ID int `json:"id"`
	// ComputeSlices is the number of SM slices (the "3" of 3g).
	ComputeSlices int `json:"computeSlices"`
	// MemorySlices is the number of memory slices, which is the size of
	// every placement (4 for 3g: it owns a slice with no SMs behind it).
	MemorySlices int `json:"memorySlices"`
	// MemoryMiB is the memory of an instance (NVML memorySizeMB, in MiB);
	// it varies slightly with the driver.
	MemoryMiB uint64 `json:"memoryMiB,omitempty"`
	// Multiprocessors is the SM count of an instance; 0 when unknown.
	Multiprocessors int `json:"multiprocessors,omitempty"`
	// MaxInstances is the most instances of this profile one GPU holds.
	MaxInstances int `json:"maxInstances"`
	// CopyEngines, Decoders, Encoders, JPEGEngines and OFAEngines are the
	// engines an instance owns (DRA counters use them). OFAEngines > 0
	// marks a media-extension profile: a GPU has one optical-flow engine,
	// so at most one instance holding one can exist (see Model.OFABudget).
	CopyEngines int `json:"copyEngines,omitempty"`
	Decoders    int `json:"decoders,omitempty"`
	Encoders    int `json:"encoders,omitempty"`
	JPEGEngines int `json:"jpegEngines,omitempty"`
	OFAEngines  int `json:"ofaEngines,omitempty"`
	// Placements are the legal placements, ascending by start.
	Placements []Placement `json:"placements"`
}

// String returns the profile's name.
func (p *Profile) String() string {
	if p == nil {
		return ""
	}
	return p.Name.String()
}

// Allows reports whether pl is one of the profile's legal placements.
func (p *Profile) Allows(pl Placement) bool {
	if p == nil {
		return false
	}
	for _, q := range p.Placements {
		if q == pl {
			return true
		}
	}
	return false
}

// PlacementAt returns the legal placement starting at slot start.
func (p *Profile) PlacementAt(start int) (Placement, bool) {
	if p == nil {
		return Placement{}, false
	}
	for _, q := range p.Placements {
		if q.Start == start {
			return q, true
		}
	}
	return Placement{}, false
}

func (p *Profile) clone() Profile {
	q := *p
	q.Placements = append([]Placement(nil), p.Placements...)
	return q
}
