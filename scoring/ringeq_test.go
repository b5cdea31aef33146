package scoring

import (
	"testing"

	"pgregory.net/rapid"
)

// Both ring programmes agree.
func TestRingProgrammesAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		node := genNode(t, 10)
		m, err := newModel(node)
		if err != nil {
			t.Fatal(err)
		}
		st := &smallTables{n: m.n}
		vals := map[int64]uint8{}
		var list []int64
		for i := range m.n {
			for j := i + 1; j < m.n; j++ {
				if _, ok := vals[m.bw[i*m.n+j]]; !ok {
					vals[m.bw[i*m.n+j]] = 0
					list = append(list, m.bw[i*m.n+j])
				}
			}
		}
		sortInt64(list)
		for r, v := range list {
			vals[v] = uint8(r + 1)
		}
		rank := make([]uint8, m.n*m.n)
		for i := range m.n {
			for j := range m.n {
				if i != j {
					rank[i*m.n+j] = vals[m.bw[i*m.n+j]]
				}
			}
		}
		a := st.ringRanks(rank)
		b := st.ringRanksByThreshold(rank, len(list))
		for mask := range a {
			if a[mask] != b[mask] {
				t.Fatalf("mask %b: %d vs %d", mask, a[mask], b[mask])
			}
		}
	})
}
