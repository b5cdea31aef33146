package amdpart

import (
	"context"
	"testing"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/mig"
)

func TestPlanAMDStopsWhenCancelled(t *testing.T) {
	gpus := amdFleet(t, 4000, 8)
	req := Request{Compute: CPX, Memory: NPS4, Owner: "x", Priority: 9}
	hostile.CheckCancellation(t, func(ctx context.Context) error {
		_, err := Plan(ctx, gpus, req, mig.Policy{Threshold: 9})
		return err
	})
}
