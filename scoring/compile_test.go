package scoring

import (
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/internal/topotest"
	"github.com/gputopo/gputopo/topology"
)

// Nodes that differ only in names, UUIDs and PCI addresses share the
// tables; a different health or link does not.
func TestShapeSharing(t *testing.T) {
	build := func(name string, seed int, unhealthy int) *topology.Node {
		b := topology.NewBuilder().SetName(name)
		for i := range 8 {
			d := topology.Device{Index: i, ID: fmt.Sprintf("GPU-%d-%d", seed, i), Model: "NVIDIA H100 80GB HBM3", NUMA: i / 4,
				PCI: topotest.MustParsePCIAddress(fmt.Sprintf("0000:%02x:00.0", seed*16+i))}
			if i == unhealthy {
				d.Health = topology.Unhealthy
			}
			b.AddDevice(d)
		}
		for i := range 8 {
			for j := i + 1; j < 8; j++ {
				b.SetLinkPair(i, j, topology.Link{Kind: topology.LinkNVSwitch, Lanes: 18, PCIe: pcieTree8(i, j)})
			}
		}
		n, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b, c := build("node-a", 1, -1), build("node-b", 2, -1), build("node-c", 3, 5)
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("fixture: UUIDs should make fingerprints differ")
	}
	ca, _ := Compile(a)
	cb, _ := Compile(b)
	cc, _ := Compile(c)
	if ca == cb || ca.shape != cb.shape {
		t.Fatalf("a and b: distinct handles %v, shared tables %v", ca != cb, ca.shape == cb.shape)
	}
	if cc.shape == ca.shape {
		t.Fatal("an unhealthy device must change the shape")
	}
	if ca.Node() != a || cb.Node() != b || ca.Len() != 8 {
		t.Fatal("Node/Len")
	}
	ra, _ := ca.Select(nil, Request{Count: 3})
	rc, _ := cc.Select(nil, Request{Count: 8})
	_ = ra
	if rc.Set.Len() != 0 {
		t.Fatal("8 devices on a node with an unhealthy one must fail")
	}
}
