package mig

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gputopo/gputopo/internal/hostile"
)

func TestPlanDefragStopsWhenCancelled(t *testing.T) {
	t.Run("no-plan", func(t *testing.T) {
		full := fullFleet(t, 3000, 1)
		req := Request{Profile: MustParseProfileName("3g.40gb"), Owner: "pending", Priority: 9}
		pol := Policy{NoEvictions: true, MoveAnyPriority: true}
		hostile.CheckCancellation(t, func(ctx context.Context) error {
			_, err := PlanDefrag(ctx, full, req, pol)
			var npe *NoPlanError
			if errors.As(err, &npe) {
				return nil // the full run's answer
			}
			return err
		})
	})
	t.Run("plan", func(t *testing.T) {
		half := halfFleet(t, 3000, 2)
		req := Request{Profile: MustParseProfileName("7g.80gb"), Owner: "pending", Priority: 9}
		hostile.CheckCancellation(t, func(ctx context.Context) error {
			_, err := PlanDefrag(ctx, half, req, Policy{})
			return err
		})
	})
}

func TestPlaceStopsWhenCancelled(t *testing.T) {
	ls := benchLayouts(t, 4000, 0, 4, 1)
	req := Request{Profile: MustParseProfileName("1g.10gb")}
	t.Run("Place", func(t *testing.T) {
		hostile.CheckCancellation(t, func(ctx context.Context) error {
			_, err := Place(ctx, ls, req, PlaceOptions{})
			return err
		})
	})
	t.Run("PlaceBatch", func(t *testing.T) {
		reqs := benchRequests(4000, 2)
		hostile.CheckCancellation(t, func(ctx context.Context) error {
			f, err := NewFleet(context.Background(), ls, PlaceOptions{})
			if err != nil {
				return err
			}
			out, err := f.PlaceBatch(ctx, reqs)
			if errors.Is(err, context.Canceled) {
				unplaced := 0
				for _, a := range out {
					if !a.OK() {
						unplaced++
					}
				}
				assert.Positive(t, unplaced, "a cancelled batch leaves requests unplaced")
				return err
			}
			if errors.Is(err, ErrNoFit) {
				return nil // some requests fit nowhere: the full run's answer
			}
			return err
		})
	})
}
