package topology

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// LinkKind classifies the path between two devices in one vendor-neutral
// set. Constants are declared from the farthest to the closest path class;
// the zero value is LinkNone, "no path", the worst case.
type LinkKind uint8

// Link kinds.
const (
	// LinkNone: no usable path is known. Scoring treats it as the worst case,
	// never as the best (ROCm allocator bug W12).
	LinkNone LinkKind = iota
	// LinkSYS: PCIe plus the inter-socket interconnect (cross NUMA).
	LinkSYS
	// LinkNODE: PCIe plus the interconnect between host bridges of one NUMA node.
	LinkNODE
	// LinkPHB: PCIe through a CPU host bridge.
	LinkPHB
	// LinkPXB: PCIe through several switches, no host bridge.
	LinkPXB
	// LinkPIX: PCIe through at most one switch.
	LinkPIX
	// LinkXGMI: AMD Infinity Fabric (xGMI) direct link; Lanes counts links.
	LinkXGMI
	// LinkNVLink: NVIDIA NVLink point-to-point; Lanes counts bonded links.
	LinkNVLink
	// LinkNVSwitch: both GPUs sit on one NVSwitch fabric; Lanes is each GPU's
	// link count into the fabric, shared by all its peers.
	LinkNVSwitch
)

var linkKindNames = [...]string{"none", "SYS", "NODE", "PHB", "PXB", "PIX", "XGMI", "NVLink", "NVSwitch"}

// String returns the kind's name: "none", the nvidia-smi PCIe class names
// ("SYS", "NODE", "PHB", "PXB", "PIX"), "XGMI", "NVLink" or "NVSwitch".
func (k LinkKind) String() string {
	if int(k) < len(linkKindNames) {
		return linkKindNames[k]
	}
	return fmt.Sprintf("LinkKind(%d)", uint8(k))
}

// parseLinkKind parses a name [LinkKind.String] returns, case-insensitively.
// Any other text (the empty string too) is an error wrapping [ErrParse].
func parseLinkKind(s string) (LinkKind, error) {
	for i, n := range linkKindNames {
		if strings.EqualFold(n, s) {
			return LinkKind(i), nil
		}
	}
	return LinkNone, fmt.Errorf("%w: unknown link kind %q (want one of %s)", ErrParse, s, strings.Join(linkKindNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler: the name [LinkKind.String]
// returns. A value outside the LinkKind constants is an error wrapping
// [ErrInvalidRequest].
func (k LinkKind) MarshalText() ([]byte, error) {
	if int(k) >= len(linkKindNames) {
		return nil, fmt.Errorf("%w: %v is not a topology.LinkKind constant", ErrInvalidRequest, k)
	}
	return []byte(linkKindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with parseLinkKind.
func (k *LinkKind) UnmarshalText(b []byte) error {
	p, err := parseLinkKind(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// IsFabric reports whether k is a GPU fabric link (NVLink, NVSwitch, XGMI).
func (k LinkKind) IsFabric() bool { return k == LinkXGMI || k == LinkNVLink || k == LinkNVSwitch }

// IsPCIe reports whether k is one of the PCIe path classes (PIX to SYS).
func (k LinkKind) IsPCIe() bool { return k >= LinkSYS && k <= LinkPIX }

// Link is the connection from one device to another.
type Link struct {
	// Kind is the best path class between the devices.
	Kind LinkKind `json:"kind"`
	// Lanes is the number of bonded NVLinks or xGMI links (the n of "NV12");
	// 0 for PCIe paths.
	Lanes int `json:"lanes,omitempty"`
	// Bandwidth is the estimated bandwidth per direction in GB/s. For
	// NVSwitch it is each GPU's total into the shared fabric. Builders fill
	// it from [EstimateBandwidth] when left 0.
	Bandwidth float64 `json:"bandwidth,omitempty"`
	// PCIe is the PCIe path class under a fabric link (NVML reports it even
	// when NVLink exists); LinkNone when unknown. For PCIe links it equals Kind.
	PCIe LinkKind `json:"pcie,omitzero"`
}

// String formats the link the way nvidia-smi and rocm-smi would name it
// ("NV12", "NVSwitch/NV18", "XGMIx2", "PIX", "none") with the bandwidth.
func (l Link) String() string {
	var s string
	switch l.Kind {
	case LinkNVLink:
		s = "NV" + strconv.Itoa(l.Lanes)
	case LinkNVSwitch:
		s = "NVSwitch/NV" + strconv.Itoa(l.Lanes)
	case LinkXGMI:
		s = "XGMIx" + strconv.Itoa(l.Lanes)
	default:
		s = l.Kind.String()
	}
	if l.Bandwidth > 0 {
		s += fmt.Sprintf(" (%s GB/s)", strconv.FormatFloat(l.Bandwidth, 'f', -1, 64))
	}
	return s
}

// Closeness returns a key that totally orders links from farthest to
// closest: a larger key is a closer link, equal keys are equal links.
//
// The order: no path < SYS < NODE < PHB < PXB < PIX < every fabric link.
// PCIe classes order by class, then bandwidth; fabric links (NVLink,
// NVSwitch, XGMI) order by bandwidth, then lane count, then kind, then the
// PCIe class beneath them; so a
// V100 NV2 pair (50 GB/s) is closer than an NV1 pair (25 GB/s), and an
// H100 NVSwitch link (450 GB/s) closer than both.
func (l Link) Closeness() uint64 {
	bw := uint64(0)
	if l.Bandwidth > 0 {
		bw = uint64(math.Min(l.Bandwidth*1000, 1<<32-1)) // MB/s, 32 bits
	}
	lanes := uint64(min(max(l.Lanes, 0), 255))
	switch {
	case l.Kind.IsFabric():
		return 2<<60 | bw<<16 | lanes<<8 | uint64(l.Kind)<<4 | uint64(l.PCIe&0xf)
	case l.Kind.IsPCIe():
		return 1<<60 | uint64(l.Kind)<<48 | bw<<16 | lanes<<8
	}
	return bw<<16 | lanes<<8
}

// Compare orders l and m by [Link.Closeness]: it returns +1 when l is
// closer than m, -1 when m is closer, 0 when they are equally close (for
// slices.SortFunc, as net/netip.Addr.Compare).
func (l Link) Compare(m Link) int {
	ca, cb := l.Closeness(), m.Closeness()
	switch {
	case ca > cb:
		return 1
	case ca < cb:
		return -1
	}
	return 0
}

// linkRates are the per-lane rates of one device generation, in GB/s per
// direction, from shared/docs/link-bandwidth.md (peak rates after encoding).
type linkRates struct {
	nvlink    float64 // per NVLink
	xgmi      float64 // per xGMI link
	pcie      float64 // x16 host link
	maxNVLink int     // NVLinks per GPU; more lanes than this across peers means an NVSwitch
}

const (
	pcieGen3 = 15.75
	pcieGen4 = 31.5
	pcieGen5 = 63.0
	// sysCap bounds a SYS (cross-socket) path: NCCL models CPU-to-CPU links
	// at 6-40 GB/s; 16 is its AMD Zen1/2 figure, near Intel Skylake's 10 and
	// below Sapphire Rapids' 22, a conservative middle.
	sysCap = 16.0
)

// rateTable maps a model substring (matched case-insensitively, first match
// wins, so longer names come first) to its rates.
var rateTable = []struct {
	match string
	rates linkRates
}{
	{"GB300", linkRates{nvlink: 50, pcie: pcieGen5, maxNVLink: 18}},
	{"GB200", linkRates{nvlink: 50, pcie: pcieGen5, maxNVLink: 18}},
	{"B300", linkRates{nvlink: 50, pcie: pcieGen5, maxNVLink: 18}},
	{"B200", linkRates{nvlink: 50, pcie: pcieGen5, maxNVLink: 18}},
	{"B100", linkRates{nvlink: 50, pcie: pcieGen5, maxNVLink: 18}},
	{"GH200", linkRates{nvlink: 25, pcie: pcieGen5, maxNVLink: 18}},
	{"H800", linkRates{nvlink: 25, pcie: pcieGen5, maxNVLink: 8}},
	{"H200", linkRates{nvlink: 25, pcie: pcieGen5, maxNVLink: 18}},
	{"H100", linkRates{nvlink: 25, pcie: pcieGen5, maxNVLink: 18}},
	{"H20", linkRates{nvlink: 25, pcie: pcieGen5, maxNVLink: 18}},
	{"A800", linkRates{nvlink: 25, pcie: pcieGen4, maxNVLink: 8}},
	{"A100", linkRates{nvlink: 25, pcie: pcieGen4, maxNVLink: 12}},
	{"A30", linkRates{nvlink: 25, pcie: pcieGen4, maxNVLink: 4}},
	{"A6000", linkRates{nvlink: 14.0625, pcie: pcieGen4, maxNVLink: 4}},
	{"A40", linkRates{nvlink: 14.0625, pcie: pcieGen4, maxNVLink: 4}},
	{"3090", linkRates{nvlink: 14.0625, pcie: pcieGen4, maxNVLink: 4}},
	{"4090", linkRates{pcie: pcieGen4}},
	{"L40", linkRates{pcie: pcieGen4}},
	{"V100", linkRates{nvlink: 25, pcie: pcieGen3, maxNVLink: 6}},
	{"P100", linkRates{nvlink: 20, pcie: pcieGen3, maxNVLink: 4}},
	{"MI355", linkRates{xgmi: 76.8, pcie: pcieGen5}},
	{"MI350", linkRates{xgmi: 76.8, pcie: pcieGen5}},
	{"MI325", linkRates{xgmi: 64, pcie: pcieGen5}},
	{"MI308", linkRates{xgmi: 64, pcie: pcieGen5}},
	{"MI300", linkRates{xgmi: 64, pcie: pcieGen5}},
	{"MI250", linkRates{xgmi: 50, pcie: pcieGen4}},
	{"MI210", linkRates{xgmi: 50, pcie: pcieGen4}},
	{"MI100", linkRates{xgmi: 46, pcie: pcieGen4}},
}

// defaultRates apply to models the table does not know: NVLink 3/4 and
// MI200-class xGMI rates on a PCIe Gen4 host, and the largest NVLink count
// any GPU has (18), so NVSwitch inference never fires on a plausible mesh.
var defaultRates = linkRates{nvlink: 25, xgmi: 50, pcie: pcieGen4, maxNVLink: 18}

func ratesFor(model string) linkRates {
	m := strings.ToUpper(model)
	for _, r := range rateTable {
		if strings.Contains(m, r.match) {
			out := r.rates
			if out.nvlink == 0 {
				out.nvlink = defaultRates.nvlink
			}
			if out.xgmi == 0 {
				out.xgmi = defaultRates.xgmi
			}
			if out.maxNVLink == 0 {
				out.maxNVLink = defaultRates.maxNVLink
			}
			return out
		}
	}
	return defaultRates
}

// maxNVLinks returns how many NVLinks one GPU of the given model has (18 when
// the model is unknown). A GPU whose NVLink lanes summed over all peers
// exceed this number must reach them through an NVSwitch.
func maxNVLinks(model string) int { return ratesFor(model).maxNVLink }

// EstimateBandwidth returns the estimated per-direction bandwidth in GB/s of
// a link of the given kind and lane count between two devices of the given
// model, from the peak rates in link-bandwidth.md:
//
//   - NVLink and NVSwitch: lanes × per-link rate (25 GB/s for V100, A100,
//     H100, H200; 50 for B200/GB200; 14.06 for GA102 bridges; 20 for P100);
//     for NVSwitch this is the GPU's total into the shared fabric.
//   - XGMI: lanes × per-link rate (46 MI100, 50 MI200, 64 MI300, 76.8 MI350).
//   - PIX, PXB, PHB, NODE: the x16 rate of the model's PCIe generation.
//   - SYS: the PCIe rate capped at 16 GB/s for the inter-socket link.
//   - none: 0.
//
// Unknown models use NVLink 25, xGMI 50 and PCIe Gen4 (31.5).
func EstimateBandwidth(kind LinkKind, lanes int, model string) float64 {
	r := ratesFor(model)
	lanes = max(lanes, 1)
	switch kind {
	case LinkNVLink, LinkNVSwitch:
		return float64(lanes) * r.nvlink
	case LinkXGMI:
		return float64(lanes) * r.xgmi
	case LinkPIX, LinkPXB, LinkPHB, LinkNODE:
		return r.pcie
	case LinkSYS:
		return math.Min(r.pcie, sysCap)
	}
	return 0
}

// weaker returns the farther of two links, as the lenient builder keeps for
// an asymmetric pair.
func weaker(a, b Link) Link {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}
