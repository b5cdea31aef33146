package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// Namespace prefixes every metric name.
const Namespace = "gputopo"

// Options tunes a Collector.
type Options struct {
	// Mix weighs the MIG profiles in fragmentation (see mig.Mix); nil
	// weighs every profile of a GPU's model equally.
	Mix mig.Mix
	// Timeout bounds one Read of the source (default 10 s).
	Timeout time.Duration
	// SetSizes are the GPU counts for which gputopo_best_free_set_score is
	// reported (default 1, 2, 4, 8); sizes above the free device count are
	// left out.
	SetSizes []int
	// ConstLabels are added to every metric (e.g. node="gpu-07").
	ConstLabels prometheus.Labels
	// ErrorLog, when set, is told why a read failed: once per failure,
	// not once per scrape (a read failing with the same message as the
	// read before it is not logged again; a success in between resets
	// that). The scrape reports gputopo_source_up 0.
	ErrorLog func(error)
	// Refresh is the least time between two reads of the source: a
	// scrape within Refresh of the previous read reuses its reading (and
	// the metrics derived from it) without calling the source. Zero reads
	// the source on every scrape.
	Refresh time.Duration
	// KeepLastGood, when set, makes a scrape after a failed read export
	// the device series of the last successful reading (with
	// gputopo_source_up 0 and the time of that reading in
	// gputopo_source_last_success_timestamp_seconds) instead of none.
	// Right for a topology-only source, whose reading does not age; wrong
	// for live readings (utilisation, memory used), which would silently
	// go stale.
	KeepLastGood bool
}

// Collector is a prometheus.Collector over a Source. A scrape reads the
// source at most once (and not at all within Options.Refresh of the
// previous read) and derives all metrics from that one reading.
// Concurrent scrapes are served one at a time and share the read.
type Collector struct {
	src  Source
	opts Options
	now  func() time.Time // time.Now; tests replace it

	mu          sync.Mutex
	attempted   bool          // a read has been made
	lastAttempt time.Time     // when the latest read started
	lastTook    time.Duration // how long it took
	lastErr     error         // its error (nil: it succeeded)
	loggedErr   string        // message of the failure last logged ("" when the latest read succeeded)
	good        *Reading      // the latest successful reading
	goodAt      time.Time     // when it was read
	derivedFrom *Reading      // the reading derived holds the metrics of
	derived     []prometheus.Metric

	up, scrapeSeconds, lastSuccess *prometheus.Desc

	deviceInfo, memTotal, memUsed, util, memUtil, temp, sensorTemp, healthy, inUse *prometheus.Desc

	nodeDevices, freeDevices, islands, islandLargest, freeConnected, freeClique, bestSet *prometheus.Desc

	migInstance, migMemTotal, migMemUsed, migSMUtil, migSMOcc, migFreeSlots, migFrag, migUnusable, migFreePlacements, migNodeFrag *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector reading src.
func New(src Source, opts Options) *Collector {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.SetSizes == nil {
		opts.SetSizes = []int{1, 2, 4, 8}
	}
	c := &Collector{src: src, opts: opts, now: time.Now}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, opts.ConstLabels)
	}
	dev := []string{"device", "uuid"}
	migLabels := []string{"device", "profile", "start"}
	c.up = d("source_up", "1 when the last read of the device source succeeded, 0 when it failed.")
	c.scrapeSeconds = d("source_read_seconds", "Time the last read of the device source took.")
	c.lastSuccess = d("source_last_success_timestamp_seconds", "Unix time of the last successful read of the device source.")
	c.deviceInfo = d("device_info", "Static facts about a device; always 1.", "device", "uuid", "model", "vendor", "pci_bus_id", "numa", "fabric_island")
	c.memTotal = d("device_memory_total_bytes", "Device memory capacity.", dev...)
	c.memUsed = d("device_memory_used_bytes", "Device memory in use.", dev...)
	c.util = d("device_utilization_ratio", "Share of time the device was busy over the provider's sample period (0..1).", dev...)
	c.memUtil = d("device_memory_utilization_ratio", "Share of time device memory was being read or written over the provider's sample period (0..1); not the share of capacity in use.", dev...)
	c.temp = d("device_temperature_celsius", "Device temperature.", dev...)
	c.sensorTemp = d("device_sensor_temperature_celsius", "Temperature of one of the device's named sensors (AMD hwmon: edge, junction, mem).", "device", "uuid", "sensor")
	c.healthy = d("device_healthy", "1 when the device can take work, 0 when the provider marked it unhealthy.", dev...)
	c.inUse = d("device_in_use", "1 when a workload holds the device (whole, or through MIG instances).", dev...)
	c.nodeDevices = d("node_devices", "Number of accelerators on the node.")
	c.freeDevices = d("node_free_devices", "Healthy devices that nothing holds.")
	c.islands = d("fabric_islands", "Number of fabric islands (devices joined by NVLink, NVSwitch or xGMI).")
	c.islandLargest = d("fabric_island_largest_devices", "Size of the largest fabric island.")
	c.freeConnected = d("free_fabric_connected_devices", "Size of the largest set of free devices connected through fabric links among free devices.")
	c.freeClique = d("free_fabric_clique_devices", "Size of the largest set of free devices that are pairwise joined by direct fabric links.")
	c.bestSet = d("best_free_set_score", "Score (0..100, package scoring) of the best set of this many free devices: how well a job of that size would be placed now.", "gpus")
	c.migInstance = d("mig_instance_info", "A MIG GPU instance; always 1.", "device", "profile", "start", "size", "state")
	c.migMemTotal = d("mig_instance_memory_total_bytes", "Memory of a MIG instance (as the provider read it, else from its profile).", migLabels...)
	c.migMemUsed = d("mig_instance_memory_used_bytes", "Memory in use in a MIG instance.", migLabels...)
	c.migSMUtil = d("mig_instance_sm_utilization_ratio", "Share of time a MIG instance's SMs had work resident over the last read interval (0..1; NVIDIA GPM SM_UTIL). The instance's temperature is its GPU's gputopo_device_temperature_celsius: NVML has no per-instance sensor.", migLabels...)
	c.migSMOcc = d("mig_instance_sm_occupancy_ratio", "Resident warps of a MIG instance's SMs as a share of their maximum over the last read interval (0..1; NVIDIA GPM SM_OCCUPANCY).", migLabels...)
	c.migFreeSlots = d("mig_free_slots", "Memory slices of a MIG GPU that no instance occupies.", "device")
	c.migFrag = d("mig_fragmentation_ratio", "Share of a MIG GPU's free slots that placement rules make unusable for the demand mix (0..1).", "device")
	c.migUnusable = d("mig_unusable_slots", "Free memory slices of a MIG GPU that placement rules make unusable, weighted by the demand mix.", "device")
	c.migFreePlacements = d("mig_free_placements", "Placements at which an instance of the profile could be created now.", "device", "profile")
	c.migNodeFrag = d("mig_node_fragmentation_ratio", "MIG fragmentation over all MIG GPUs of the node (0..1).")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.scrapeSeconds, c.lastSuccess, c.deviceInfo, c.memTotal, c.memUsed, c.util, c.memUtil, c.temp, c.sensorTemp, c.healthy, c.inUse,
		c.nodeDevices, c.freeDevices, c.islands, c.islandLargest, c.freeConnected, c.freeClique, c.bestSet,
		c.migInstance, c.migMemTotal, c.migMemUsed, c.migSMUtil, c.migSMOcc, c.migFreeSlots, c.migFrag, c.migUnusable, c.migFreePlacements, c.migNodeFrag} {
		ch <- d
	}
}

// errNoTopology is a source's answer without a node.
var errNoTopology = errors.New("source returned no topology")

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.attempted || c.now().Sub(c.lastAttempt) >= c.opts.Refresh {
		c.read()
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeSeconds, prometheus.GaugeValue, c.lastTook.Seconds())
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, b2f(c.lastErr == nil))
	if c.good == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, float64(c.goodAt.UnixNano())/1e9)
	if c.lastErr != nil && !c.opts.KeepLastGood {
		return
	}
	if c.derivedFrom != c.good {
		c.derived = c.derived[:0]
		mc := make(chan prometheus.Metric)
		go func() {
			defer close(mc)
			c.collect(mc, c.good)
		}()
		for m := range mc {
			c.derived = append(c.derived, m)
		}
		c.derivedFrom = c.good
	}
	for _, m := range c.derived {
		ch <- m
	}
}

// ReadNow reads the source now, whatever Options.Refresh says, and
// returns the read's error; the next scrapes export what it read. A
// program calls it once at start so that a bad source is reported before
// the first scrape.
func (c *Collector) ReadNow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	return c.lastErr
}

// read reads the source once and records the outcome; c.mu is held.
func (c *Collector) read() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	start := c.now()
	r, err := c.src.Read(ctx)
	if err == nil && (r == nil || r.Node == nil) {
		err = errNoTopology
	}
	c.attempted, c.lastAttempt, c.lastTook, c.lastErr = true, start, c.now().Sub(start), err
	if err == nil {
		c.good, c.goodAt, c.loggedErr = r, start, ""
		return
	}
	if msg := err.Error(); msg != c.loggedErr {
		c.loggedErr = msg
		if c.opts.ErrorLog == nil {
			return
		}
		if c.good != nil && c.opts.KeepLastGood {
			c.opts.ErrorLog(fmt.Errorf("reading devices: %w (exporting the last good reading, from %s)", err, c.goodAt.UTC().Format(time.RFC3339)))
		} else {
			c.opts.ErrorLog(fmt.Errorf("reading devices: %w", err))
		}
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *Collector) collect(ch chan<- prometheus.Metric, r *Reading) {
	n := r.Node
	migOf := map[int]MIGReading{}
	for _, m := range r.MIG {
		if m.Layout != nil && m.Device >= 0 && m.Device < n.Len() {
			migOf[m.Device] = m
		}
	}
	state := scoring.NewState(n.Len())
	free := scoring.DeviceSet{}
	for i := 0; i < n.Len(); i++ {
		d := n.Device(i)
		var rd DeviceReading
		if i < len(r.Devices) {
			rd = r.Devices[i]
		}
		m, isMIG := migOf[i]
		used := rd.InUse || isMIG && len(m.Layout.Instances) > 0
		if used {
			_ = state.Allocate(i) // in range and not yet allocated
		} else if d.Health == topology.Healthy {
			free = free.With(i)
		}
		idx, uuid := strconv.Itoa(i), d.ID
		numa := ""
		if d.NUMA >= 0 {
			numa = strconv.Itoa(d.NUMA)
		}
		gauge(ch, c.deviceInfo, 1, idx, uuid, d.Model, d.Vendor.String(), d.PCI.String(), numa, strconv.Itoa(n.Island(i)))
		switch {
		case rd.HasMemory:
			gauge(ch, c.memTotal, float64(rd.MemoryTotal), idx, uuid)
			gauge(ch, c.memUsed, float64(rd.MemoryUsed), idx, uuid)
		case d.MemoryBytes > 0:
			gauge(ch, c.memTotal, float64(d.MemoryBytes), idx, uuid)
		}
		if rd.HasUtilization {
			gauge(ch, c.util, rd.Utilization, idx, uuid)
		}
		if rd.HasMemoryUtilization {
			gauge(ch, c.memUtil, rd.MemoryUtilization, idx, uuid)
		}
		if rd.HasTemperature {
			gauge(ch, c.temp, rd.TemperatureC, idx, uuid)
		}
		for _, name := range slices.Sorted(maps.Keys(rd.Temperatures)) {
			gauge(ch, c.sensorTemp, rd.Temperatures[name], idx, uuid, name)
		}
		gauge(ch, c.healthy, b2f(d.Health == topology.Healthy), idx, uuid)
		gauge(ch, c.inUse, b2f(used), idx, uuid)
	}
	gauge(ch, c.nodeDevices, float64(n.Len()))
	gauge(ch, c.freeDevices, float64(free.Len()))
	largest := 0
	for _, isl := range n.Islands() {
		largest = max(largest, len(isl))
	}
	gauge(ch, c.islands, float64(len(n.Islands())))
	gauge(ch, c.islandLargest, float64(largest))
	if n.Len() <= scoring.MaxDevices {
		adj := fabricAdjacency(n)
		gauge(ch, c.freeConnected, float64(largestComponent(adj, free)))
		gauge(ch, c.freeClique, float64(largestClique(adj, free)))
		// Unhealthy devices are never chosen by scoring; MIG GPUs and
		// devices in use are allocated in state.
		for _, k := range c.opts.SetSizes {
			if k < 1 || k > free.Len() {
				continue
			}
			if ns, err := scoring.ScoreNode(n, state, scoring.Request{Count: k}); err == nil {
				gauge(ch, c.bestSet, float64(ns.Score), strconv.Itoa(k))
			}
		}
	}
	var layouts []*mig.Layout
	for i := 0; i < n.Len(); i++ {
		m, ok := migOf[i]
		if !ok {
			continue
		}
		layouts = append(layouts, m.Layout)
		idx := strconv.Itoa(i)
		for _, in := range m.Layout.Instances {
			start := strconv.Itoa(in.Placement.Start)
			gauge(ch, c.migInstance, 1, idx, in.Profile.String(), start, strconv.Itoa(in.Placement.Size), in.State.String())
			if total, ok := m.InstanceMemoryTotal[in.Placement.Start]; ok && total > 0 {
				gauge(ch, c.migMemTotal, float64(total), idx, in.Profile.String(), start)
			} else if p, err := m.Layout.Model.Profile(in.Profile.String()); err == nil && p.MemoryMiB > 0 {
				gauge(ch, c.migMemTotal, float64(p.MemoryMiB<<20), idx, in.Profile.String(), start)
			}
			if used, ok := m.InstanceMemoryUsed[in.Placement.Start]; ok {
				gauge(ch, c.migMemUsed, float64(used), idx, in.Profile.String(), start)
			}
			if v, ok := m.InstanceSMUtilization[in.Placement.Start]; ok {
				gauge(ch, c.migSMUtil, v, idx, in.Profile.String(), start)
			}
			if v, ok := m.InstanceSMOccupancy[in.Placement.Start]; ok {
				gauge(ch, c.migSMOcc, v, idx, in.Profile.String(), start)
			}
		}
		gauge(ch, c.migFreeSlots, float64(m.Layout.FreeSlots()), idx)
		if f, err := m.Layout.Fragmentation(c.opts.Mix); err == nil {
			gauge(ch, c.migFrag, f.Score, idx)
			gauge(ch, c.migUnusable, f.UnusableSlots, idx)
		}
		for _, p := range m.Layout.Model.Profiles() {
			if pls, err := m.Layout.FreePlacements(p.Name.String()); err == nil {
				gauge(ch, c.migFreePlacements, float64(len(pls)), idx, p.Name.String())
			}
		}
	}
	if len(layouts) > 0 {
		if f, err := mig.NodeFragmentation(layouts, c.opts.Mix); err == nil {
			gauge(ch, c.migNodeFrag, f.Score)
		}
	}
}
