package nvidia_test

import (
	"context"
	"testing"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
)

// BenchmarkDiscover measures one discovery of a reference machine through
// the fake NVML: the provider's own cost (the fake answers in nanoseconds;
// a real driver takes microseconds to milliseconds per call), and the number
// of NVML calls it makes, reported as calls/op. Every NVLink is read once
// per GPU and every pair once per direction (go-gpuallocator re-reads each
// GPU's links for every pair, allocators.md B5).
func BenchmarkDiscover(b *testing.B) {
	for _, name := range []string{"dgx-h100", "dgx1-v100", "pcie-8gpu-2numa", "gb200-nvl72-tray"} {
		b.Run(name, func(b *testing.B) {
			ref, err := catalog.Get(name)
			if err != nil {
				b.Fatal(err)
			}
			m := nvidiatest.FromNode(ref)
			p := nvidia.New(nvidia.WithLibrary(m), nvidia.WithNodeName(name), nvidia.WithoutSysfs())
			ctx := context.Background()
			before := m.Calls()
			b.ReportAllocs()
			for b.Loop() {
				n, err := p.Discover(ctx)
				if err != nil || n.Len() != ref.Len() {
					b.Fatalf("Discover: %v", err)
				}
			}
			b.ReportMetric(float64(m.Calls()-before)/float64(b.N), "calls/op")
		})
	}
}
