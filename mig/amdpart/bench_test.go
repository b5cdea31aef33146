package amdpart

import (
	"context"
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/mig"
)

// BenchmarkPlanAMDScale plans a CPX partition over 1,000, 5,000 and 25,000
// busy MI300X GPUs, in hives of 8 and in one hive (a memory-mode change
// then takes the whole fleet down).
func BenchmarkPlanAMDScale(b *testing.B) {
	for _, n := range []int{1000, 5000, 25000} {
		for _, hive := range []int{8, n} {
			gpus := amdFleet(b, n, hive)
			name := fmt.Sprintf("%d-hive%d", n, hive)
			b.Run(name, func(b *testing.B) {
				req := Request{Compute: CPX, Memory: NPS4, Owner: "x", Priority: 9}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Plan(context.Background(), gpus, req, mig.Policy{Threshold: 9}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
