package provider_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

func TestFileProviderReadsBothForms(t *testing.T) {
	dir := t.TempDir()
	want, err := catalog.Get("dgx1-v100")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := want.MarshalJSON()
	jsonPath := filepath.Join(dir, "dgx1.json")
	if err := os.WriteFile(jsonPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := provider.File(jsonPath, topology.NvidiaSMIOptions{}).Discover(context.Background())
	if err != nil || !got.Equal(want) {
		t.Fatalf("JSON file: %v", err)
	}

	smi := "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-7\nGPU1\tNV12\t X \t0-7\n"
	smiPath := filepath.Join(dir, "node.txt")
	if err := os.WriteFile(smiPath, []byte(smi), 0o644); err != nil {
		t.Fatal(err)
	}
	p := provider.File(smiPath, topology.NvidiaSMIOptions{Model: "NVIDIA A100-SXM4-80GB"})
	n, err := p.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.Name() != "node" || n.Link(0, 1).Kind != topology.LinkNVLink || n.Link(0, 1).Bandwidth != 300 {
		t.Errorf("nvidia-smi file: %v %v", n.Name(), n.Link(0, 1))
	}
	if !strings.HasPrefix(p.Name(), "file:") {
		t.Errorf("name %q", p.Name())
	}
}

func TestFileProviderErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := provider.File(filepath.Join(dir, "missing.json"), topology.NvidiaSMIOptions{}).Discover(ctx); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, provider.ErrFile) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[]}`), 0o644)
	_, err := provider.File(bad, topology.NvidiaSMIOptions{}).Discover(ctx)
	if !errors.Is(err, topology.ErrInvalidTopology) || !strings.Contains(err.Error(), "missing link") || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("invalid JSON topology: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.txt")
	os.WriteFile(garbage, []byte("hello\nworld\n"), 0o644)
	if _, err := provider.File(garbage, topology.NvidiaSMIOptions{}).Discover(ctx); !errors.Is(err, topology.ErrParse) {
		t.Errorf("garbage: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := provider.File(bad, topology.NvidiaSMIOptions{}).Discover(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestParseLenientJSON(t *testing.T) {
	doc := []byte(`{"schema":"gputopo/v1","devices":[{"index":0},{"index":1}],"links":[]}`)
	n, err := provider.Parse(doc, topology.NvidiaSMIOptions{Lenient: true})
	if err != nil || len(n.Warnings()) != 1 {
		t.Fatalf("lenient parse: %v %v", n, err)
	}
}

func TestCatalogProvider(t *testing.T) {
	p, err := provider.Catalog("mi300x-8gpu")
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Discover(context.Background())
	if err != nil || n.Len() != 8 || p.Name() != "catalog:mi300x-8gpu" {
		t.Fatalf("%v %v %v", p.Name(), n, err)
	}
	if _, err := provider.Catalog("dgx-9000"); !errors.Is(err, catalog.ErrUnknownMachine) {
		t.Errorf("unknown machine: %v", err)
	}
}

// A real printout from ../shared (when present) goes through the file
// provider the way a user feeds their own machine.
func TestFileProviderOnRealPrintout(t *testing.T) {
	f := shareddata.Topology(t, "dgx-a100")
	path := filepath.Join(t.TempDir(), "dgx-a100.txt")
	os.WriteFile(path, []byte(strings.Join(f.Matrix, "\n")+"\n"), 0o644)
	n, err := provider.File(path, topology.NvidiaSMIOptions{Model: f.GPUs[0].Model}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Node()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n.Len(); i++ {
		for j := 0; j < n.Len(); j++ {
			if n.Link(i, j) != want.Link(i, j) {
				t.Fatalf("link %d-%d: %v, want %v", i, j, n.Link(i, j), want.Link(i, j))
			}
		}
	}
}
