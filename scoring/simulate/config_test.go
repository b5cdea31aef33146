package simulate

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigRejectsNonsense: Replay and ReplayAll refuse configurations
// outside their documented ranges with ErrInvalidConfig naming the field,
// before any work.
func TestConfigRejectsNonsense(t *testing.T) {
	nodes := []Node{{Name: "a", CPUMilli: 8000, MemoryBytes: 8192 << 20, GPUs: 2, Model: "T4"}}
	pods := []Pod{{Name: "p", CPUMilli: 1000, GPUs: 1, GPUMilli: 500}}
	ctx := context.Background()
	bad := map[string]struct {
		cfg  Config
		says string
	}{
		"NaN inflation":      {Config{Inflation: math.NaN()}, "Inflation NaN"},
		"+Inf inflation":     {Config{Inflation: math.Inf(1)}, "Inflation +Inf"},
		"-Inf inflation":     {Config{Inflation: math.Inf(-1)}, "Inflation -Inf"},
		"negative inflation": {Config{Inflation: -0.5}, "negative"},
		"huge inflation":     {Config{Inflation: MaxInflation + 1}, "MaxInflation"},
		"NaN coverage":       {Config{Coverage: math.NaN()}, "Coverage"},
		"negative coverage":  {Config{Coverage: -0.1}, "Coverage"},
		"coverage above 1":   {Config{Coverage: 1.5}, "Coverage"},
		"unknown tie-break":  {Config{TieBreak: 7}, "TieBreak 7"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, c.cfg.Validate(), ErrInvalidConfig)
			_, err := Replay(ctx, nodes, pods, FGD(), c.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.Contains(t, err.Error(), c.says)
			_, err = ReplayAll(ctx, Experiment{Nodes: nodes, Pods: pods, Policies: []Policy{FGD()}, Seeds: []int64{1}, Config: c.cfg}, WithWorkers(1))
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	for name, cfg := range map[string]Config{
		"zero":         {},
		"no inflation": {Inflation: NoInflation},
		"max":          {Inflation: MaxInflation, Coverage: 1, TieBreak: TieRandom},
	} {
		t.Run("accepts "+name, func(t *testing.T) {
			require.NoError(t, cfg.Validate())
			_, err := Replay(ctx, nodes, pods, BestFit(), cfg)
			require.NoError(t, err)
		})
	}
	t.Run("workers", func(t *testing.T) {
		_, err := ReplayAll(ctx, Experiment{Nodes: nodes, Pods: pods, Policies: []Policy{FGD()}, Seeds: []int64{1}}, WithWorkers(-1))
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.Contains(t, err.Error(), "-1 workers")
		res, err := ReplayAll(ctx, Experiment{Nodes: nodes, Pods: pods, Policies: []Policy{FGD()}, Seeds: []int64{1, 2}}, WithWorkers(0))
		require.NoError(t, err)
		require.Len(t, res, 2)
	})
	t.Run("nil policy", func(t *testing.T) {
		_, err := Replay(ctx, nodes, pods, nil, Config{})
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = ReplayAll(ctx, Experiment{Nodes: nodes, Pods: pods, Policies: []Policy{FGD(), nil}, Seeds: []int64{1}})
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.Contains(t, err.Error(), "policy 1 is nil")
	})
}
