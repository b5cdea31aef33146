package mig

import "sync"

// The shipped profile tables, written from ../shared/docs/facts-partitions.md
// §1.3 (real `nvidia-smi mig -lgip/-lgipp` captures and NVIDIA's
// supported-profiles pages). They are fallbacks and test fixtures: tables the
// NVIDIA provider discovers through NVML take precedence (Catalog.With).
// Where the facts mark a value as inferred it is noted; a 0 means unknown.

// pl builds placements of one size at the given starts.
func pl(size int, starts ...int) []Placement {
	out := make([]Placement, len(starts))
	for i, s := range starts {
		out[i] = Placement{Start: s, Size: size}
	}
	return out
}

// row is one line of a profile table.
type row struct {
	name               string
	id, cs, ms, sm     int
	mib                uint64
	max                int
	dec, jpeg, ofa, ce int
	placements         []Placement
}

func rows(rs ...row) []Profile {
	out := make([]Profile, len(rs))
	for i, r := range rs {
		out[i] = Profile{
			Name: MustParseProfileName(r.name), ID: r.id, ComputeSlices: r.cs, MemorySlices: r.ms,
			MemoryMiB: r.mib, Multiprocessors: r.sm, MaxInstances: r.max,
			Decoders: r.dec, JPEGEngines: r.jpeg, OFAEngines: r.ofa, CopyEngines: r.ce,
			Placements: r.placements,
		}
	}
	return out
}

// The generic 8-slot placement table (A100, H100 and, inferred, H200, GH200,
// B200): {0..6}:1 for 1g and 1g+me, {0,2,4,6}:2 for the two-slice 1g,
// {0,2,4}:2 for 2g, {0,4}:4 for 3g, {0}:4 for 4g, {0}:8 for 7g.
var (
	p1  = func() []Placement { return pl(1, 0, 1, 2, 3, 4, 5, 6) }
	p1w = func() []Placement { return pl(2, 0, 2, 4, 6) }
	p2  = func() []Placement { return pl(2, 0, 2, 4) }
	p3  = func() []Placement { return pl(4, 0, 4) }
	p4  = func() []Placement { return pl(4, 0) }
	p7  = func() []Placement { return pl(8, 0) }
)

func shippedSpecs() []ModelSpec {
	return []ModelSpec{
		{
			Name:         "A100-40GB",
			Aliases:      []string{"A100-SXM4-40GB", "A100-PCIE-40GB", "A100-40"},
			PCIDeviceIDs: []uint32{0x20B010DE, 0x20F110DE, 0x20B110DE, 0x20F610DE},
			Slots:        8,
			Source:       "shipped",
			// [V] real -lgip/-lgipp, MIG guide; MiB from NVML (matches lgip GiB).
			Profiles: rows(
				row{"1g.5gb", 19, 1, 1, 14, 4864, 7, 0, 0, 0, 1, p1()},
				row{"1g.5gb+me", 20, 1, 1, 14, 4864, 1, 1, 1, 1, 1, p1()},
				row{"1g.10gb", 15, 1, 2, 14, 9856, 4, 1, 0, 0, 1, p1w()},
				row{"2g.10gb", 14, 2, 2, 28, 9856, 3, 1, 0, 0, 2, p2()},
				row{"3g.20gb", 9, 3, 4, 42, 19968, 2, 2, 0, 0, 3, p3()},
				row{"4g.20gb", 5, 4, 4, 56, 19968, 1, 2, 0, 0, 4, p4()},
				row{"7g.40gb", 0, 7, 8, 98, 40192, 1, 5, 1, 1, 7, p7()},
			),
		},
		{
			Name:         "A100-80GB",
			Aliases:      []string{"A100-SXM4-80GB", "A100-PCIE-80GB", "A100-80"},
			PCIDeviceIDs: []uint32{0x20B210DE, 0x20B510DE, 0x20F310DE, 0x20F510DE},
			Slots:        8,
			Source:       "shipped",
			// [V] real lgip on driver 515.86.01; the 1g.20gb MiB is inferred
			// from 2g.20gb (same memory slices).
			Profiles: rows(
				row{"1g.10gb", 19, 1, 1, 14, 9728, 7, 0, 0, 0, 1, p1()},
				row{"1g.10gb+me", 20, 1, 1, 14, 9728, 1, 1, 1, 1, 1, p1()},
				row{"1g.20gb", 15, 1, 2, 14, 19968, 4, 1, 0, 0, 1, p1w()},
				row{"2g.20gb", 14, 2, 2, 28, 19968, 3, 1, 0, 0, 2, p2()},
				row{"3g.40gb", 9, 3, 4, 42, 40192, 2, 2, 0, 0, 3, p3()},
				row{"4g.40gb", 5, 4, 4, 56, 40192, 1, 2, 0, 0, 4, p4()},
				row{"7g.80gb", 0, 7, 8, 98, 80896, 1, 5, 1, 1, 7, p7()},
			),
		},
		{
			Name:    "A30-24GB",
			Aliases: []string{"A30", "A30-PCIE-24GB"},
			Slots:   4,
			Source:  "shipped",
			// [V] IDs and placements from a real A30 lgip; 2g.12gb+me is R525+
			// [I]. Memory, SMs and engines are not in the facts (0 = unknown),
			// except the one optical-flow engine the +me profiles share.
			Profiles: rows(
				row{"1g.6gb", 14, 1, 1, 0, 0, 4, 0, 0, 0, 0, pl(1, 0, 1, 2, 3)},
				row{"1g.6gb+me", 21, 1, 1, 0, 0, 1, 0, 0, 1, 0, pl(1, 0, 1, 2, 3)},
				row{"2g.12gb", 5, 2, 2, 0, 0, 2, 0, 0, 0, 0, pl(2, 0, 2)},
				row{"2g.12gb+me", 6, 2, 2, 0, 0, 1, 0, 0, 1, 0, pl(2, 0, 2)},
				row{"4g.24gb", 0, 4, 4, 0, 0, 1, 0, 0, 1, 0, pl(4, 0)},
			),
		},
		{
			Name:         "H100-80GB",
			Aliases:      []string{"H100-SXM5-80GB", "H100-PCIE-80GB", "H100-80GB-HBM3", "H800"},
			PCIDeviceIDs: []uint32{0x233010DE, 0x233110DE, 0x232210DE},
			Slots:        8,
			Source:       "shipped",
			// [V] real lgip/lgipp. SMs are not 16 per slice: 1g.20gb has 26, 3g 60.
			Profiles: rows(
				row{"1g.10gb", 19, 1, 1, 16, 9984, 7, 1, 1, 0, 1, p1()},
				row{"1g.10gb+me", 20, 1, 1, 16, 9984, 1, 1, 1, 1, 1, p1()},
				row{"1g.20gb", 15, 1, 2, 26, 20096, 4, 1, 1, 0, 1, p1w()},
				row{"2g.20gb", 14, 2, 2, 32, 20096, 3, 2, 2, 0, 2, p2()},
				row{"3g.40gb", 9, 3, 4, 60, 40448, 2, 3, 3, 0, 3, p3()},
				row{"4g.40gb", 5, 4, 4, 64, 40448, 1, 4, 4, 0, 4, p4()},
				row{"7g.80gb", 0, 7, 8, 132, 81152, 1, 7, 7, 1, 8, p7()},
			),
		},
		{
			Name:         "H100-94GB",
			Aliases:      []string{"H100-NVL", "H100-SXM5-94GB", "H800-NVL"},
			PCIDeviceIDs: []uint32{0x232110DE, 0x233A10DE},
			Slots:        8,
			Source:       "shipped",
			// [V] real lgip/lgipp (H100 NVL, driver 560.35.03).
			Profiles: rows(
				row{"1g.12gb", 19, 1, 1, 16, 11008, 7, 1, 1, 0, 1, p1()},
				row{"1g.12gb+me", 20, 1, 1, 16, 11008, 1, 1, 1, 1, 1, p1()},
				row{"1g.24gb", 15, 1, 2, 26, 22144, 4, 1, 1, 0, 1, p1w()},
				row{"2g.24gb", 14, 2, 2, 32, 22144, 3, 2, 2, 0, 2, p2()},
				row{"3g.47gb", 9, 3, 4, 60, 47488, 2, 3, 3, 0, 3, p3()},
				row{"4g.47gb", 5, 4, 4, 64, 47488, 1, 4, 4, 0, 4, p4()},
				row{"7g.94gb", 0, 7, 8, 132, 95360, 1, 7, 7, 1, 8, p7()},
			),
		},
		{
			Name:         "GH200-96GB",
			Aliases:      []string{"GH200", "H100-96GB", "GH200-480GB", "H20"},
			PCIDeviceIDs: []uint32{0x234210DE, 0x233D10DE, 0x232910DE},
			Slots:        8,
			Source:       "shipped",
			// [V] real lgip; placements [I] (the generic table).
			Profiles: rows(
				row{"1g.12gb", 19, 1, 1, 16, 11264, 7, 1, 1, 0, 1, p1()},
				row{"1g.12gb+me", 20, 1, 1, 16, 11264, 1, 1, 1, 1, 1, p1()},
				row{"1g.24gb", 15, 1, 2, 26, 23552, 4, 1, 1, 0, 1, p1w()},
				row{"2g.24gb", 14, 2, 2, 32, 23552, 3, 2, 2, 0, 2, p2()},
				row{"3g.48gb", 9, 3, 4, 60, 47616, 2, 3, 3, 0, 3, p3()},
				row{"4g.48gb", 5, 4, 4, 64, 47616, 1, 4, 4, 0, 4, p4()},
				row{"7g.96gb", 0, 7, 8, 132, 95232, 1, 7, 7, 1, 8, p7()},
			),
		},
		{
			Name:         "H200-141GB",
			Aliases:      []string{"H200", "H200-SXM5-141GB", "H200-NVL"},
			PCIDeviceIDs: []uint32{0x233510DE, 0x233B10DE},
			Slots:        8,
			Source:       "shipped",
			// [V] names, slices, limits, engines (docs); IDs, placements and SMs
			// [I] (as H100). MiB from a test fixture [U] where known.
			Profiles: rows(
				row{"1g.18gb", 19, 1, 1, 16, 16384, 7, 1, 1, 0, 1, p1()},
				row{"1g.18gb+me", 20, 1, 1, 16, 16384, 1, 1, 1, 1, 1, p1()},
				row{"1g.35gb", 15, 1, 2, 26, 33280, 4, 1, 1, 0, 1, p1w()},
				row{"2g.35gb", 14, 2, 2, 32, 33280, 3, 2, 2, 0, 2, p2()},
				row{"3g.71gb", 9, 3, 4, 60, 0, 2, 3, 3, 0, 3, p3()},
				row{"4g.71gb", 5, 4, 4, 64, 0, 1, 4, 4, 0, 4, p4()},
				row{"7g.141gb", 0, 7, 8, 132, 143360, 1, 7, 7, 1, 8, p7()},
			),
		},
		{
			Name:         "B200-180GB",
			Aliases:      []string{"B200"},
			PCIDeviceIDs: []uint32{0x290110DE},
			Slots:        8,
			Source:       "shipped",
			// [V] names, slices, limits, engines, copy engines (docs table);
			// IDs and placements [I] (as H100); SMs and MiB unknown.
			Profiles: rows(
				row{"1g.23gb", 19, 1, 1, 0, 0, 7, 1, 1, 0, 2, p1()},
				row{"1g.23gb+me", 20, 1, 1, 0, 0, 1, 1, 1, 1, 2, p1()},
				row{"1g.45gb", 15, 1, 2, 0, 0, 4, 1, 1, 0, 2, p1w()},
				row{"2g.45gb", 14, 2, 2, 0, 0, 3, 1, 1, 0, 3, p2()},
				row{"3g.90gb", 9, 3, 4, 0, 0, 2, 1, 1, 0, 6, p3()},
				row{"4g.90gb", 5, 4, 4, 0, 0, 1, 1, 1, 0, 8, p4()},
				row{"7g.180gb", 0, 7, 8, 0, 0, 1, 1, 1, 1, 16, p7()},
			),
		},
	}
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
)

// DefaultCatalog returns the catalog of shipped tables: A100-40GB,
// A100-80GB, A30-24GB, H100-80GB, H100-94GB, GH200-96GB, H200-141GB and
// B200-180GB. Combine it with discovered tables through Catalog.With.
func DefaultCatalog() *Catalog {
	defaultOnce.Do(func() {
		var ms []*Model
		for _, s := range shippedSpecs() {
			ms = append(ms, MustNewModel(s))
		}
		defaultCat = NewCatalog(ms...)
	})
	return defaultCat
}
