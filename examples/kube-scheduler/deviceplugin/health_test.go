package deviceplugin_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/kube-scheduler/deviceplugin"
	"github.com/gputopo/gputopo/topology"
)

// withHealth returns n with the listed devices unhealthy and the devices
// in drop removed (a GPU that fell off the bus).
func withHealth(t testing.TB, n *topology.Node, unhealthy map[int]string) *topology.Node {
	t.Helper()
	data, err := json.Marshal(n)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	for i, d := range doc["devices"].([]any) {
		if reason, ok := unhealthy[i]; ok {
			d.(map[string]any)["health"] = "unhealthy"
			d.(map[string]any)["healthReason"] = reason
		}
	}
	data, err = json.Marshal(doc)
	require.NoError(t, err)
	out, err := topology.ParseJSON(data)
	require.NoError(t, err)
	return out
}

// sequence is a Discoverer that returns its nodes (or errors) in turn, then
// the last one forever.
type sequence struct {
	mu    sync.Mutex
	steps []any
}

func (s *sequence) Discover(context.Context) (*topology.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	if err, ok := step.(error); ok {
		return nil, err
	}
	return step.(*topology.Node), nil
}

func TestDetectHealthReportsChanges(t *testing.T) {
	base := withUUIDs(t, catalogNode(t, "dgx-h100"))
	sick := withHealth(t, base, map[int]string{2: "XID 79", 5: "ECC"})
	fewer, err := topology.ParseJSON(mustJSONWithoutDevice(t, base))
	require.NoError(t, err)
	var errs []error
	src := deviceplugin.DetectHealth{
		Provider: &sequence{steps: []any{base, sick, errors.New("nvml gone"), base, fewer}},
		Interval: time.Millisecond, Initial: base,
		OnError: func(err error) { errs = append(errs, err) },
	}
	events := make(chan deviceplugin.HealthEvent, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(ev deviceplugin.HealthEvent) { events <- ev }) }()
	next := func() deviceplugin.HealthEvent {
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no health event")
			return deviceplugin.HealthEvent{}
		}
	}
	assert.Equal(t, deviceplugin.HealthEvent{ID: "GPU-dgx-h100-2", Healthy: false, Reason: "XID 79"}, next())
	assert.Equal(t, deviceplugin.HealthEvent{ID: "GPU-dgx-h100-5", Healthy: false, Reason: "ECC"}, next())
	assert.Equal(t, deviceplugin.HealthEvent{ID: "GPU-dgx-h100-2", Healthy: true}, next())
	assert.Equal(t, deviceplugin.HealthEvent{ID: "GPU-dgx-h100-5", Healthy: true}, next())
	assert.Equal(t, deviceplugin.HealthEvent{ID: "GPU-dgx-h100-7", Healthy: false, Reason: "device no longer discovered"}, next())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NotEmpty(t, errs)
	select {
	case ev := <-events:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// mustJSONWithoutDevice drops n's last device (and the links and NIC
// links that name it).
func mustJSONWithoutDevice(t testing.TB, n *topology.Node) []byte {
	t.Helper()
	data, err := json.Marshal(n)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	last := float64(n.Len() - 1)
	devs := doc["devices"].([]any)
	doc["devices"] = devs[:len(devs)-1]
	for _, key := range []string{"links", "nicLinks"} {
		list, _ := doc[key].([]any)
		var kept []any
		for _, l := range list {
			m := l.(map[string]any)
			if m["a"] == last || m["b"] == last || m["device"] == last || m["dev"] == last {
				continue
			}
			kept = append(kept, l)
		}
		if list != nil {
			doc[key] = kept
		}
	}
	out, err := json.Marshal(doc)
	require.NoError(t, err)
	return out
}

func TestHealthChannelStopsWhenClosed(t *testing.T) {
	ch := make(chan deviceplugin.HealthEvent, 1)
	ch <- deviceplugin.HealthEvent{ID: "0"}
	close(ch)
	var got []deviceplugin.HealthEvent
	require.NoError(t, deviceplugin.HealthChannel(ch).Run(context.Background(), func(ev deviceplugin.HealthEvent) { got = append(got, ev) }))
	assert.Equal(t, []deviceplugin.HealthEvent{{ID: "0"}}, got)
}

// TestPreferredFallsBackWhenScoringHasNoSet: the start-time topology marks
// device 2 unhealthy; after it is reported healthy kubelet offers it, and
// a request that needs it still gets a valid answer (must-include first,
// then the lowest indices) instead of failing the pod's admission.
func TestPreferredFallsBackWhenScoringHasNoSet(t *testing.T) {
	node := withHealth(t, catalogNode(t, "dgx-h100"), map[int]string{2: "XID 48"})
	p := newPlugin(t, node, nil, nil)
	require.NoError(t, p.SetHealth("2", true, ""))
	got, err := preferred(t, p, []string{"1", "2", "3"}, []string{"3"}, 3)
	require.NoError(t, err)
	assert.Equal(t, []string{"1", "2", "3"}, got)
	got, err = preferred(t, p, []string{"0", "1", "2", "3", "4"}, []string{"2"}, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"0", "2"}, got)
	// Where the healthy devices suffice, scoring leaves device 2 out.
	got, err = preferred(t, p, []string{"1", "2", "3"}, nil, 2)
	require.NoError(t, err)
	assert.NotContains(t, got, "2")
}
