package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/topology"
)

// HealthOverlay wraps a topology source and overrides the health of chosen
// devices: an external health checker (or a test) marks a GPU unhealthy
// without the hardware provider noticing. It is a
// provider.TopologyProvider and safe for concurrent use.
type HealthOverlay struct {
	src  provider.TopologyProvider
	mu   sync.Mutex
	over map[int]healthOverride
}

type healthOverride struct {
	health topology.Health
	reason string
}

// NewHealthOverlay returns an overlay over src with no overrides.
func NewHealthOverlay(src provider.TopologyProvider) *HealthOverlay {
	return &HealthOverlay{src: src, over: map[int]healthOverride{}}
}

// Name returns the wrapped source's name.
func (o *HealthOverlay) Name() string { return o.src.Name() }

// SetHealth overrides the health of device index (reason explains an
// unhealthy state). It takes effect on the next Discover.
func (o *HealthOverlay) SetHealth(index int, h topology.Health, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.over[index] = healthOverride{h, reason}
}

// Clear removes the override of device index.
func (o *HealthOverlay) Clear(index int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.over, index)
}

// Discover returns the wrapped source's topology with the overrides
// applied. An override naming a device the node does not have is an error
// wrapping [ErrOverride].
func (o *HealthOverlay) Discover(ctx context.Context) (*topology.Node, error) {
	n, err := o.src.Discover(ctx)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	over := maps.Clone(o.over)
	o.mu.Unlock()
	return withHealth(n, over)
}

// withHealth returns n with the health of the devices in over replaced.
func withHealth(n *topology.Node, over map[int]healthOverride) (*topology.Node, error) {
	if len(over) == 0 {
		return n, nil
	}
	for i := range over {
		if i < 0 || i >= n.Len() {
			return nil, fmt.Errorf("%w: device %d, node %q has %d devices", ErrOverride, i, n.Name(), n.Len())
		}
	}
	// Node is immutable; rebuild it through its JSON form, which carries
	// every field.
	b, err := n.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	var devs []map[string]json.RawMessage
	if err := json.Unmarshal(doc["devices"], &devs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	for i, ov := range over {
		h, _ := json.Marshal(ov.health)
		devs[i]["health"] = h
		delete(devs[i], "healthReason")
		if ov.health != topology.Healthy && ov.reason != "" {
			r, _ := json.Marshal(ov.reason)
			devs[i]["healthReason"] = r
		}
	}
	if doc["devices"], err = json.Marshal(devs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	if b, err = json.Marshal(doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	m, err := topology.ParseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOverride, err)
	}
	return m, nil
}
