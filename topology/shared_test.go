package topology_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/topology"
)

// Every real machine in ../shared/data/topologies loads through the public
// API and survives a JSON round trip.
func TestSharedTopologiesLoad(t *testing.T) {
	files := shareddata.Topologies(t)
	if len(files) != 23 {
		t.Errorf("found %d topology files, want 23", len(files))
	}
	for _, f := range files {
		t.Run(f.ID, func(t *testing.T) {
			n, err := f.Node()
			if err != nil {
				t.Fatal(err)
			}
			if n.Len() != f.GPUCount {
				t.Errorf("%d devices, want gpu_count %d", n.Len(), f.GPUCount)
			}
			if w := n.Warnings(); len(w) > 0 {
				t.Errorf("warnings on a strict build: %v", w)
			}
			b, err := n.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			m, err := topology.ParseJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			if !n.Equal(m) || n.Fingerprint() != m.Fingerprint() {
				t.Errorf("JSON round trip changed the node")
			}
		})
	}
}

// For every nvidia-smi file, the parser applied to its matrix lines yields
// the link kinds of its links: cell by cell for the rows printed in full,
// and pair by pair for the converted node.
func TestSharedNvidiaSMIMatricesAgree(t *testing.T) {
	count := 0
	for _, f := range shareddata.Topologies(t) {
		if f.RawFormat != "nvidia-smi topo -m" {
			continue
		}
		count++
		t.Run(f.ID, func(t *testing.T) {
			text := strings.Join(f.Matrix, "\n")
			table, err := topology.ParseSMITable(strings.NewReader(text))
			if err != nil {
				t.Fatal(err)
			}
			want := map[[2]int]string{}
			for _, l := range f.Links {
				want[[2]int{l.A, l.B}] = l.Kind
				want[[2]int{l.B, l.A}] = l.Kind
			}
			truncated := map[int]bool{}
			for _, g := range f.GPUs {
				if g.RowInSource != "" {
					truncated[g.Index] = true
				}
			}
			checked := 0
			for _, r := range table.Rows {
				var i int
				if _, err := fmt.Sscanf(r.Name, "GPU%d", &i); err != nil || truncated[i] {
					continue
				}
				if r.Truncated(len(table.Columns)) {
					t.Errorf("row %s is truncated but the file says it is whole", r.Name)
				}
				for j := 0; j < table.GPUs; j++ {
					if i == j {
						if r.Cells[j] != "X" {
							t.Errorf("row %s diagonal %q", r.Name, r.Cells[j])
						}
						continue
					}
					if r.Cells[j] != want[[2]int{i, j}] {
						t.Errorf("GPU%d-GPU%d: matrix %q, links %q", i, j, r.Cells[j], want[[2]int{i, j}])
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("no cells compared")
			}
			// Pairs the printout never shows (DGX-2 rows 5-15) were inferred
			// by the file's author: the lenient parser reports them as "no
			// path" with a warning, and the comparison skips them.
			inferred := map[[2]int]bool{}
			for _, l := range f.Links {
				if l.Inferred {
					inferred[[2]int{l.A, l.B}], inferred[[2]int{l.B, l.A}] = true, true
				}
			}
			ref := f.GPUs[0].Model
			n, err := table.Node(topology.NvidiaSMIOptions{Name: f.ID, Model: ref, Lenient: len(inferred) > 0})
			if f.ID == "hgx-b200-degraded-gpu2" && table.GPUs != f.GPUCount {
				t.Fatalf("header-less matrix: inferred %d GPUs, want %d", table.GPUs, f.GPUCount)
			}
			if err != nil {
				t.Fatal(err)
			}
			exp, err := f.Node()
			if err != nil {
				t.Fatal(err)
			}
			if n.Len() != exp.Len() {
				t.Fatalf("%d GPUs, want %d", n.Len(), exp.Len())
			}
			for i := 0; i < n.Len(); i++ {
				for j := 0; j < n.Len(); j++ {
					if inferred[[2]int{i, j}] {
						if n.Link(i, j).Kind != topology.LinkNone {
							t.Errorf("link %d-%d is not printed, parsed as %v", i, j, n.Link(i, j))
						}
						continue
					}
					if got, want := n.Link(i, j), exp.Link(i, j); got != want {
						t.Errorf("link %d-%d: parsed %v, file %v", i, j, got, want)
					}
				}
			}
		})
	}
	if count != 12 {
		t.Errorf("%d nvidia-smi files, want 12", count)
	}
}
