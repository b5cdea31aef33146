package migtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migtest"
)

var one = mig.MustParseProfileName("1g.10gb")

func h100(t testing.TB) *mig.Model {
	t.Helper()
	m, err := mig.DefaultCatalog().Lookup("H100-80GB")
	require.NoError(t, err)
	return m
}

func TestFakeFollowsTheHardwareRules(t *testing.T) {
	web := mig.Instance{Profile: one, Placement: mig.Placement{Start: 4, Size: 1}, State: mig.InUse, Owner: "web", Priority: 3}
	l, err := mig.NewLayout("g", h100(t), web)
	require.NoError(t, err)
	fake, err := migtest.NewFake(l)
	require.NoError(t, err)
	ctx := context.Background()
	steps := []mig.Step{
		{Kind: mig.StepCreateGPUInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 1, Size: 1}},
		{Kind: mig.StepCreateComputeInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 1, Size: 1}, Owner: "web", Priority: 3},
		{Kind: mig.StepDrain, GPU: "g", Profile: one, Placement: mig.Placement{Start: 4, Size: 1}},
		{Kind: mig.StepDestroyComputeInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 4, Size: 1}},
		{Kind: mig.StepDestroyGPUInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 4, Size: 1}},
		{Kind: mig.StepCreateGPUInstance, GPU: "g", Profile: mig.MustParseProfileName("3g.40gb"), Placement: mig.Placement{Start: 4, Size: 4}},
	}
	p := &mig.Plan{Steps: steps}
	n, err := mig.ApplyPlan(ctx, fake, p, mig.DryRun)
	require.NoError(t, err)
	require.Equal(t, len(steps), n)
	require.Empty(t, fake.Log(), "a dry run changes nothing")
	n, err = mig.ApplyPlan(ctx, fake, p, mig.Commit)
	require.NoError(t, err)
	require.Equal(t, len(steps), n)
	assert.Equal(t, steps, fake.Log())
	got, err := fake.Layouts(ctx)
	require.NoError(t, err)
	require.Equal(t, ".A..bbbb", got[0].SlotMap())

	// The hardware rules, through both the fake and mig.ApplyStep.
	for _, tc := range []struct {
		name string
		s    mig.Step
		want error
	}{
		{"taken slice", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 4, Size: 1}}, mig.ErrOverlap},
		{"illegal placement", mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 7, Size: 1}}, mig.ErrIllegalPlacement},
		{"work runs", mig.Step{Kind: mig.StepDestroyComputeInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 1, Size: 1}}, mig.ErrInUse},
		{"compute instance left", mig.Step{Kind: mig.StepDestroyGPUInstance, GPU: "g", Profile: one, Placement: mig.Placement{Start: 1, Size: 1}}, mig.ErrInUse},
		{"no instance", mig.Step{Kind: mig.StepDrain, GPU: "g", Profile: one, Placement: mig.Placement{Start: 2, Size: 1}}, mig.ErrNoInstance},
		{"no GPU", mig.Step{Kind: mig.StepDrain, GPU: "nope", Profile: one, Placement: mig.Placement{Start: 1, Size: 1}}, mig.ErrUnknownGPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, fake.Apply(ctx, tc.s, mig.DryRun), tc.want, "fake")
			assert.ErrorIs(t, mig.ApplyStep(got, tc.s), tc.want, "ApplyStep")
		})
	}
	err = fake.Apply(ctx, mig.Step{Kind: mig.StepSetComputeMode, GPU: "g", Mode: "CPX"}, mig.Commit)
	assert.ErrorIs(t, err, mig.ErrUnsupported, "a mode step on the MIG fake")
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	// A failing commit stops ApplyPlan at that step.
	f2, err := migtest.NewFake(l)
	require.NoError(t, err)
	f2.FailAt(3, mig.ErrInUse)
	n, err = mig.ApplyPlan(ctx, f2, p, mig.Commit)
	assert.ErrorIs(t, err, mig.ErrInUse)
	assert.Equal(t, 2, n)
}

func TestFakeRefusesBadInput(t *testing.T) {
	l, err := mig.NewLayout("g", h100(t))
	require.NoError(t, err)
	_, err = migtest.NewFake(l, l)
	assert.ErrorIs(t, err, mig.ErrInvalidLayout, "duplicate GPU")
	_, err = migtest.NewFake(&mig.Layout{GPU: "x"})
	assert.ErrorIs(t, err, mig.ErrInvalidLayout, "no model")
	var nilFake *migtest.Fake
	_, err = nilFake.Layouts(context.Background())
	assert.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := migtest.NewFake(l)
	require.NoError(t, err)
	assert.ErrorIs(t, f.Apply(ctx, mig.Step{Kind: mig.StepDrain, GPU: "g"}, mig.DryRun), context.Canceled)
}

// TestFakeAgreesWithApplyStep applies random steps, legal or not, through
// the fake and through mig.ApplyStep: both accept and refuse the same
// steps and hold the same layouts after every step.
func TestFakeAgreesWithApplyStep(t *testing.T) {
	models := []string{"A100-80GB", "H100-80GB", "A30-24GB", "H200-141GB"}
	kinds := []mig.StepKind{mig.StepCreateGPUInstance, mig.StepCreateGPUInstance, mig.StepCreateComputeInstance,
		mig.StepDrain, mig.StepDestroyComputeInstance, mig.StepDestroyGPUInstance}
	rapid.Check(t, func(t *rapid.T) {
		m, err := mig.DefaultCatalog().Lookup(rapid.SampledFrom(models).Draw(t, "model"))
		require.NoError(t, err)
		var ls []*mig.Layout
		for i := range rapid.IntRange(1, 3).Draw(t, "gpus") {
			l, err := mig.NewLayout(fmt.Sprintf("g%d", i), m)
			require.NoError(t, err)
			ls = append(ls, l)
		}
		fake, err := migtest.NewFake(ls...)
		require.NoError(t, err)
		ctx := context.Background()
		profiles := m.Profiles()
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			p := rapid.SampledFrom(profiles).Draw(t, "profile")
			s := mig.Step{
				Kind:      rapid.SampledFrom(kinds).Draw(t, "kind"),
				GPU:       rapid.SampledFrom([]string{"g0", "g1", "g2"}).Draw(t, "gpu"),
				Profile:   p.Name,
				Placement: mig.Placement{Start: rapid.IntRange(0, m.Slots()-1).Draw(t, "start"), Size: p.MemorySlices},
				Owner:     rapid.SampledFrom([]string{"", "w"}).Draw(t, "owner"),
			}
			want := mig.ApplyStep(ls, s)
			got := fake.Apply(ctx, s, mig.Commit)
			require.Equal(t, want == nil, got == nil, "%v: ApplyStep %v, fake %v", s, want, got)
			after, err := fake.Layouts(ctx)
			require.NoError(t, err)
			for k := range after {
				require.Equal(t, ls[k].String(), after[k].String(), "after %v", s)
			}
		}
	})
}

// TestFakeInstanceUUID: the fake names each compute instance by a
// deterministic "MIG-" UUID: two fakes fed the same steps agree, distinct
// instances differ, a re-created instance gets a new one, and an instance
// without a compute instance (or no instance) has none.
func TestFakeInstanceUUID(t *testing.T) {
	ctx := context.Background()
	at := func(s int) mig.Placement { return mig.Placement{Start: s, Size: 1} }
	busy := mig.Instance{Profile: one, Placement: at(6), State: mig.InUse, Owner: "web"}
	run := func() (*migtest.Fake, []string) {
		l, err := mig.NewLayout("g", h100(t), busy)
		require.NoError(t, err)
		fake, err := migtest.NewFake(l)
		require.NoError(t, err)
		var ids []string
		for _, s := range []int{0, 1} {
			require.NoError(t, fake.Apply(ctx, mig.Step{Kind: mig.StepCreateGPUInstance, GPU: "g", Profile: one, Placement: at(s)}, mig.Commit))
			_, err := fake.InstanceUUID(ctx, "g", at(s))
			require.ErrorIs(t, err, mig.ErrNoInstance, "no compute instance yet")
			require.NoError(t, fake.Apply(ctx, mig.Step{Kind: mig.StepCreateComputeInstance, GPU: "g", Placement: at(s)}, mig.Commit))
			id, err := fake.InstanceUUID(ctx, "g", at(s))
			require.NoError(t, err)
			ids = append(ids, id)
		}
		id, err := fake.InstanceUUID(ctx, "g", at(6))
		require.NoError(t, err)
		return fake, append(ids, id)
	}
	fake, a := run()
	_, b := run()
	assert.Equal(t, a, b, "same steps, same UUIDs")
	for _, id := range a {
		assert.Regexp(t, `^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, id)
	}
	assert.Len(t, map[string]bool{a[0]: true, a[1]: true, a[2]: true}, 3)

	// Destroy and re-create at slot 0: a new UUID.
	for _, k := range []mig.StepKind{mig.StepDestroyComputeInstance, mig.StepCreateComputeInstance} {
		require.NoError(t, fake.Apply(ctx, mig.Step{Kind: k, GPU: "g", Placement: at(0)}, mig.Commit))
	}
	again, err := fake.InstanceUUID(ctx, "g", at(0))
	require.NoError(t, err)
	assert.NotEqual(t, a[0], again)

	_, err = fake.InstanceUUID(ctx, "g", at(3))
	assert.ErrorIs(t, err, mig.ErrNoInstance)
	_, err = fake.InstanceUUID(ctx, "g", mig.Placement{Start: 0, Size: 2})
	assert.ErrorIs(t, err, mig.ErrNoInstance, "the size must match too")
	_, err = fake.InstanceUUID(ctx, "nope", at(0))
	assert.ErrorIs(t, err, mig.ErrUnknownGPU)
	var none *migtest.Fake
	_, err = none.InstanceUUID(ctx, "g", at(0))
	assert.ErrorIs(t, err, mig.ErrUnknownGPU)
}
