package nvidiatest

import (
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// Profile tables of real GPUs, written from nvidia-smi mig -lgip/-lgipp
// captures (facts-partitions.md §1.3): real profile IDs (19, 20, 15, 14, 9,
// 5, 0), memory-slice placements and engine counts. They are test fixtures;
// the provider itself reads tables from NVML.

func placements(size int, starts ...int) []mig.Placement {
	out := make([]mig.Placement, len(starts))
	for i, s := range starts {
		out[i] = mig.Placement{Start: s, Size: size}
	}
	return out
}

type row struct {
	index, id, cs, ms, sm int
	mib                   uint64
	max                   int
	starts                []int
	ce, dec, jpeg, ofa    int
	name                  string
}

func table(rows []row) *MIG {
	g := &MIG{InfoVersion: 3}
	for _, r := range rows {
		g.Profiles = append(g.Profiles, MIGProfile{
			Info: nvml.GPUInstanceProfileInfo{
				Index: r.index, ID: r.id, Name: "MIG " + r.name, SliceCount: r.cs, InstanceCount: r.max,
				MultiprocessorCount: r.sm, MemorySizeMB: r.mib,
				CopyEngines: r.ce, Decoders: r.dec, JPEGs: r.jpeg, OFAs: r.ofa, P2P: true,
			},
			Placements: placements(r.ms, r.starts...),
		})
	}
	return g
}

var all7 = []int{0, 1, 2, 3, 4, 5, 6}

// A100SXM440GB returns the MIG table of an A100-SXM4-40GB (40960 MiB),
// MIG off and no instances.
func A100SXM440GB() *MIG {
	return table([]row{
		{0, 19, 1, 1, 14, 4864, 7, all7, 1, 0, 0, 0, "1g.5gb"},
		{7, 20, 1, 1, 14, 4864, 1, all7, 1, 1, 1, 1, "1g.5gb+me"},
		{9, 15, 1, 2, 14, 9856, 4, []int{0, 2, 4, 6}, 1, 1, 0, 0, "1g.10gb"},
		{1, 14, 2, 2, 28, 9856, 3, []int{0, 2, 4}, 2, 1, 0, 0, "2g.10gb"},
		{2, 9, 3, 4, 42, 19968, 2, []int{0, 4}, 3, 2, 0, 0, "3g.20gb"},
		{3, 5, 4, 4, 56, 19968, 1, []int{0}, 4, 2, 0, 0, "4g.20gb"},
		{4, 0, 7, 8, 98, 40192, 1, []int{0}, 7, 5, 1, 1, "7g.40gb"},
	})
}

// H100SXM580GB returns the MIG table of an H100 80GB HBM3 (81559 MiB),
// MIG off and no instances.
func H100SXM580GB() *MIG {
	return table([]row{
		{0, 19, 1, 1, 16, 9984, 7, all7, 1, 1, 1, 0, "1g.10gb"},
		{7, 20, 1, 1, 16, 9984, 1, all7, 1, 1, 1, 1, "1g.10gb+me"},
		{9, 15, 1, 2, 26, 20096, 4, []int{0, 2, 4, 6}, 1, 1, 1, 0, "1g.20gb"},
		{1, 14, 2, 2, 32, 20096, 3, []int{0, 2, 4}, 2, 2, 2, 0, "2g.20gb"},
		{2, 9, 3, 4, 60, 40448, 2, []int{0, 4}, 3, 3, 3, 0, "3g.40gb"},
		{3, 5, 4, 4, 64, 40448, 1, []int{0}, 4, 4, 4, 0, "4g.40gb"},
		{4, 0, 7, 8, 132, 81152, 1, []int{0}, 8, 7, 7, 1, "7g.80gb"},
	})
}

// Generic8Slot returns the 8-slot table shared by A100, H100, H200 and B200
// (same IDs, slices, placements and instance limits) for a GPU of the given
// memory, with each profile's memory its fraction of the GPU's (1/8, 2/8,
// 4/8, all) and names derived from it. Engine and SM counts are those of the
// H100. It stands in for models without a captured table.
func Generic8Slot(memory uint64) *MIG {
	gib := (memory + 1<<30 - 1) >> 30
	mib := memory >> 20
	name := func(g int, eighths uint64, suffix string) string {
		return fmt.Sprintf("%dg.%dgb%s", g, (eighths*gib+4)/8, suffix)
	}
	return table([]row{
		{0, 19, 1, 1, 16, mib / 8, 7, all7, 1, 1, 1, 0, name(1, 1, "")},
		{7, 20, 1, 1, 16, mib / 8, 1, all7, 1, 1, 1, 1, name(1, 1, "+me")},
		{9, 15, 1, 2, 26, mib / 4, 4, []int{0, 2, 4, 6}, 1, 1, 1, 0, name(1, 2, "")},
		{1, 14, 2, 2, 32, mib / 4, 3, []int{0, 2, 4}, 2, 2, 2, 0, name(2, 2, "")},
		{2, 9, 3, 4, 60, mib / 2, 2, []int{0, 4}, 3, 3, 3, 0, name(3, 4, "")},
		{3, 5, 4, 4, 64, mib / 2, 1, []int{0}, 4, 4, 4, 0, name(4, 4, "")},
		{4, 0, 7, 8, 132, mib, 1, []int{0}, 8, 7, 7, 1, name(7, 8, "")},
	})
}

// MIGFor returns a fresh fixture table for a GPU model name and memory size
// (bytes, 0 if unknown): the captured H100 80GB and A100 40GB tables, else
// Generic8Slot.
func MIGFor(model string, memory uint64) *MIG {
	m := strings.ToUpper(model)
	switch {
	case strings.Contains(m, "H100") && memory <= 80<<30+1<<29:
		return H100SXM580GB()
	case strings.Contains(m, "A100") && memory != 0 && memory <= 48<<30:
		return A100SXM440GB()
	case memory == 0:
		return Generic8Slot(80 << 30)
	}
	return Generic8Slot(memory)
}
