package deviceplugin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/gputopo/gputopo/topology"
)

// HealthEvent says that a device's health changed.
type HealthEvent struct {
	// ID is the device's ID as offered to kubelet (DeviceID).
	ID string
	// Healthy is the device's new health.
	Healthy bool
	// Reason explains an unhealthy state.
	Reason string
}

// HealthSource reports device health changes to a Plugin.
type HealthSource interface {
	// Run calls report for every change until ctx is done (it then returns
	// ctx.Err() or nil) or the source fails.
	Run(ctx context.Context, report func(HealthEvent)) error
}

// HealthChannel is a HealthSource fed by a channel (an NVML event loop, a
// test): Run forwards every event until the channel is closed or ctx is
// done.
type HealthChannel <-chan HealthEvent

// Run implements HealthSource.
func (c HealthChannel) Run(ctx context.Context, report func(HealthEvent)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-c:
			if !ok {
				return nil
			}
			report(ev)
		}
	}
}

// Discoverer discovers the node's topology; provider.TopologyProvider is
// one.
type Discoverer interface {
	// Discover returns the node's topology as it is now.
	Discover(ctx context.Context) (*topology.Node, error)
}

// DetectHealth is a HealthSource that discovers the node's topology again
// every Interval through Provider and reports the devices whose health
// (topology.Device.Health) changed since the last discovery. Devices are
// matched by DeviceID; a device the new discovery lacks (fell off the bus)
// is reported unhealthy. A failed discovery is reported through OnError and
// changes nothing.
type DetectHealth struct {
	// Provider discovers the topology (detect.DefaultProviders' first
	// working one, a file, ...).
	Provider Discoverer
	// Interval is the time between discoveries (default 30 s).
	Interval time.Duration
	// Initial is the topology the plugin started from; nil: the first
	// discovery sets the baseline and reports nothing.
	Initial *topology.Node
	// OnError, when set, receives failed discoveries.
	OnError func(error)
}

// Run implements HealthSource.
func (d DetectHealth) Run(ctx context.Context, report func(HealthEvent)) error {
	interval := d.Interval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	var last map[string]HealthEvent
	if d.Initial != nil {
		last = healthOf(d.Initial)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n, err := d.Provider.Discover(ctx)
		if err != nil {
			if d.OnError != nil && ctx.Err() == nil {
				d.OnError(err)
			}
			continue
		}
		now := healthOf(n)
		if last != nil {
			for _, ev := range diffHealth(last, now) {
				report(ev)
			}
		}
		last = now
	}
}

// healthOf maps each device's ID to its health.
func healthOf(n *topology.Node) map[string]HealthEvent {
	out := make(map[string]HealthEvent, n.Len())
	for _, dev := range n.Devices() {
		id := DeviceID(dev)
		out[id] = HealthEvent{ID: id, Healthy: dev.Health == topology.Healthy, Reason: dev.HealthReason}
	}
	return out
}

// diffHealth lists the changes from before to now; devices missing from
// now are unhealthy, devices new in now are not reported (the plugin does
// not offer them).
func diffHealth(before, now map[string]HealthEvent) []HealthEvent {
	var out []HealthEvent
	for id, b := range before {
		n, ok := now[id]
		if !ok {
			n = HealthEvent{ID: id, Healthy: false, Reason: "device no longer discovered"}
		}
		if n.Healthy != b.Healthy {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b HealthEvent) int { return strings.Compare(a.ID, b.ID) })
	return out
}
