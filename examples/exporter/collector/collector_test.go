package collector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// fakeSource is the provider stand-in: a fixed reading, or an error.
type fakeSource struct {
	r   *collector.Reading
	err error
}

func (f fakeSource) Read(context.Context) (*collector.Reading, error) { return f.r, f.err }

func node(t testing.TB, name string) *topology.Node {
	t.Helper()
	n, err := catalog.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// h100Reading: a DGX H100 where GPUs 0 and 1 run whole-GPU jobs, GPU 2 is
// in MIG mode with a 3g.40gb instance in use at slots 0-3 and an idle
// 1g.10gb at slot 4, and the provider read memory, utilisation and
// temperature of GPUs 0 and 1 only (memory utilisation of GPU 0 only).
func h100Reading(t testing.TB) *collector.Reading {
	t.Helper()
	n := node(t, "dgx-h100")
	model, err := mig.DefaultCatalog().ForDevice(n.Device(2))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := mig.NewLayout("gpu2", model,
		mig.Instance{Profile: mustProfile(t, "3g.40gb"), Placement: mig.Placement{Start: 0}, State: mig.InUse, Owner: "train"},
		mig.Instance{Profile: mustProfile(t, "1g.10gb"), Placement: mig.Placement{Start: 4}})
	if err != nil {
		t.Fatal(err)
	}
	devs := make([]collector.DeviceReading, 8)
	devs[0] = collector.DeviceReading{HasMemory: true, MemoryTotal: 80 << 30, MemoryUsed: 60 << 30,
		HasUtilization: true, Utilization: 0.97, HasMemoryUtilization: true, MemoryUtilization: 0.41,
		HasTemperature: true, TemperatureC: 71, InUse: true}
	devs[1] = collector.DeviceReading{HasMemory: true, MemoryTotal: 80 << 30, MemoryUsed: 1 << 30,
		HasUtilization: true, Utilization: 0.25, HasTemperature: true, TemperatureC: 44, InUse: true}
	return &collector.Reading{Node: n, Devices: devs,
		MIG: []collector.MIGReading{{Device: 2, Layout: layout, InstanceMemoryUsed: map[int]uint64{0: 30 << 30}}}}
}

func mustProfile(t testing.TB, s string) mig.ProfileName {
	t.Helper()
	p, err := mig.ParseProfileName(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCollectorDGXH100(t *testing.T) {
	c := collector.New(fakeSource{r: h100Reading(t)}, collector.Options{})
	want := `
# HELP gputopo_source_up 1 when the last read of the device source succeeded, 0 when it failed.
# TYPE gputopo_source_up gauge
gputopo_source_up 1
# HELP gputopo_node_devices Number of accelerators on the node.
# TYPE gputopo_node_devices gauge
gputopo_node_devices 8
# HELP gputopo_node_free_devices Healthy devices that nothing holds.
# TYPE gputopo_node_free_devices gauge
gputopo_node_free_devices 5
# HELP gputopo_free_fabric_clique_devices Size of the largest set of free devices that are pairwise joined by direct fabric links.
# TYPE gputopo_free_fabric_clique_devices gauge
gputopo_free_fabric_clique_devices 5
# HELP gputopo_free_fabric_connected_devices Size of the largest set of free devices connected through fabric links among free devices.
# TYPE gputopo_free_fabric_connected_devices gauge
gputopo_free_fabric_connected_devices 5
# HELP gputopo_device_utilization_ratio Share of time the device was busy over the provider's sample period (0..1).
# TYPE gputopo_device_utilization_ratio gauge
gputopo_device_utilization_ratio{device="0",uuid=""} 0.97
gputopo_device_utilization_ratio{device="1",uuid=""} 0.25
# HELP gputopo_device_memory_utilization_ratio Share of time device memory was being read or written over the provider's sample period (0..1); not the share of capacity in use.
# TYPE gputopo_device_memory_utilization_ratio gauge
gputopo_device_memory_utilization_ratio{device="0",uuid=""} 0.41
# HELP gputopo_device_temperature_celsius Device temperature.
# TYPE gputopo_device_temperature_celsius gauge
gputopo_device_temperature_celsius{device="0",uuid=""} 71
gputopo_device_temperature_celsius{device="1",uuid=""} 44
# HELP gputopo_device_in_use 1 when a workload holds the device (whole, or through MIG instances).
# TYPE gputopo_device_in_use gauge
gputopo_device_in_use{device="0",uuid=""} 1
gputopo_device_in_use{device="1",uuid=""} 1
gputopo_device_in_use{device="2",uuid=""} 1
gputopo_device_in_use{device="3",uuid=""} 0
gputopo_device_in_use{device="4",uuid=""} 0
gputopo_device_in_use{device="5",uuid=""} 0
gputopo_device_in_use{device="6",uuid=""} 0
gputopo_device_in_use{device="7",uuid=""} 0
# HELP gputopo_mig_free_slots Memory slices of a MIG GPU that no instance occupies.
# TYPE gputopo_mig_free_slots gauge
gputopo_mig_free_slots{device="2"} 3
# HELP gputopo_mig_instance_info A MIG GPU instance; always 1.
# TYPE gputopo_mig_instance_info gauge
gputopo_mig_instance_info{device="2",profile="1g.10gb",size="1",start="4",state="idle"} 1
gputopo_mig_instance_info{device="2",profile="3g.40gb",size="4",start="0",state="in-use"} 1
# HELP gputopo_mig_instance_memory_used_bytes Memory in use in a MIG instance.
# TYPE gputopo_mig_instance_memory_used_bytes gauge
gputopo_mig_instance_memory_used_bytes{device="2",profile="3g.40gb",start="0"} 3.221225472e+10
# HELP gputopo_mig_free_placements Placements at which an instance of the profile could be created now.
# TYPE gputopo_mig_free_placements gauge
gputopo_mig_free_placements{device="2",profile="1g.10gb"} 2
gputopo_mig_free_placements{device="2",profile="1g.10gb+me"} 2
gputopo_mig_free_placements{device="2",profile="1g.20gb"} 1
gputopo_mig_free_placements{device="2",profile="2g.20gb"} 0
gputopo_mig_free_placements{device="2",profile="3g.40gb"} 0
gputopo_mig_free_placements{device="2",profile="4g.40gb"} 0
gputopo_mig_free_placements{device="2",profile="7g.80gb"} 0
`
	// The placements above follow the H100 table (1g at slots 0-6, 1g.20gb
	// at 0,2,4,6, 2g at 0,2,4, 3g at 0,4, 4g and 7g at 0): with slots 0-4
	// taken, 1g fits at 5 and 6, 1g.20gb at 6, nothing larger.
	names := []string{"gputopo_source_up", "gputopo_node_devices", "gputopo_node_free_devices", "gputopo_free_fabric_clique_devices",
		"gputopo_free_fabric_connected_devices", "gputopo_device_utilization_ratio", "gputopo_device_memory_utilization_ratio",
		"gputopo_device_temperature_celsius", "gputopo_device_in_use", "gputopo_mig_free_slots", "gputopo_mig_instance_info", "gputopo_mig_instance_memory_used_bytes",
		"gputopo_mig_free_placements"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Memory: read values for GPUs 0 and 1, topology capacity for the rest.
	if got := testutil.CollectAndCount(c, "gputopo_device_memory_used_bytes"); got != 2 {
		t.Errorf("%d memory-used series, want 2 (only GPUs 0 and 1 were read)", got)
	}
	if got := testutil.CollectAndCount(c, "gputopo_device_memory_total_bytes"); got != 8 {
		t.Errorf("%d memory-total series, want 8", got)
	}
	// Fragmentation agrees with package mig on the same layout.
	r := h100Reading(t)
	f, err := r.MIG[0].Layout.Fragmentation(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantFrag := fmt.Sprintf(`
# HELP gputopo_mig_fragmentation_ratio Share of a MIG GPU's free slots that placement rules make unusable for the demand mix (0..1).
# TYPE gputopo_mig_fragmentation_ratio gauge
gputopo_mig_fragmentation_ratio{device="2"} %v
`, f.Score)
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantFrag), "gputopo_mig_fragmentation_ratio"); err != nil {
		t.Error(err)
	}
	if f.Score <= 0 {
		t.Errorf("fragmentation %v: the idle 1g at slot 4 should strand slots", f.Score)
	}
}

// TestMIGInstanceMemory: an instance's used memory is exported only when
// read; its total is the read one when there is one, else its profile's.
func TestMIGInstanceMemory(t *testing.T) {
	for _, tc := range []struct {
		name        string
		used, total map[int]uint64
		want        string
	}{
		{"read", map[int]uint64{0: 30 << 30, 4: 0}, map[int]uint64{0: 40320 << 20, 4: 9856 << 20}, `
gputopo_mig_instance_memory_total_bytes{device="2",profile="1g.10gb",start="4"} 1.0334765056e+10
gputopo_mig_instance_memory_total_bytes{device="2",profile="3g.40gb",start="0"} 4.2278584320e+10
gputopo_mig_instance_memory_used_bytes{device="2",profile="1g.10gb",start="4"} 0
gputopo_mig_instance_memory_used_bytes{device="2",profile="3g.40gb",start="0"} 3.221225472e+10
`},
		{"not read", nil, nil, `
gputopo_mig_instance_memory_total_bytes{device="2",profile="1g.10gb",start="4"} PROFILE1G
gputopo_mig_instance_memory_total_bytes{device="2",profile="3g.40gb",start="0"} PROFILE3G
`},
		{"one read", map[int]uint64{4: 1 << 30}, map[int]uint64{4: 9856 << 20}, `
gputopo_mig_instance_memory_total_bytes{device="2",profile="1g.10gb",start="4"} 1.0334765056e+10
gputopo_mig_instance_memory_total_bytes{device="2",profile="3g.40gb",start="0"} PROFILE3G
gputopo_mig_instance_memory_used_bytes{device="2",profile="1g.10gb",start="4"} 1.073741824e+09
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h100Reading(t)
			r.MIG[0].InstanceMemoryUsed, r.MIG[0].InstanceMemoryTotal = tc.used, tc.total
			profileBytes := func(name string) string {
				p, err := r.MIG[0].Layout.Model.Profile(name)
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprint(float64(p.MemoryMiB << 20))
			}
			want := strings.NewReplacer("PROFILE1G", profileBytes("1g.10gb"), "PROFILE3G", profileBytes("3g.40gb")).Replace(tc.want)
			var total, used []string
			for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
				if strings.HasPrefix(l, "gputopo_mig_instance_memory_total_bytes") {
					total = append(total, l)
				} else {
					used = append(used, l)
				}
			}
			exp := "# HELP gputopo_mig_instance_memory_total_bytes Memory of a MIG instance (as the provider read it, else from its profile).\n" +
				"# TYPE gputopo_mig_instance_memory_total_bytes gauge\n" + strings.Join(total, "\n") + "\n"
			if len(used) > 0 {
				exp += "# HELP gputopo_mig_instance_memory_used_bytes Memory in use in a MIG instance.\n" +
					"# TYPE gputopo_mig_instance_memory_used_bytes gauge\n" + strings.Join(used, "\n") + "\n"
			}
			c := collector.New(fakeSource{r: r}, collector.Options{})
			if err := testutil.CollectAndCompare(c, strings.NewReader(exp),
				"gputopo_mig_instance_memory_total_bytes", "gputopo_mig_instance_memory_used_bytes"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBestSetScore: the best-set gauges equal scoring.ScoreNode on the
// state the reading implies.
func TestBestSetScore(t *testing.T) {
	r := h100Reading(t)
	c := collector.New(fakeSource{r: r}, collector.Options{SetSizes: []int{1, 2, 4, 8}})
	st := scoring.NewState(8)
	if err := st.Allocate(0, 1, 2); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# HELP gputopo_best_free_set_score Score (0..100, package scoring) of the best set of this many free devices: how well a job of that size would be placed now.\n# TYPE gputopo_best_free_set_score gauge\n")
	for _, k := range []int{1, 2, 4} { // 8 > 5 free devices: left out
		ns, err := scoring.ScoreNode(r.Node, st, scoring.Request{Count: k})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "gputopo_best_free_set_score{gpus=\"%d\"} %d\n", k, ns.Score)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(b.String()), "gputopo_best_free_set_score"); err != nil {
		t.Error(err)
	}
}

func TestCollectorSourceError(t *testing.T) {
	var logged error
	c := collector.New(fakeSource{err: errors.New("NVML: driver not loaded")}, collector.Options{ErrorLog: func(err error) { logged = err }})
	want := `
# HELP gputopo_source_up 1 when the last read of the device source succeeded, 0 when it failed.
# TYPE gputopo_source_up gauge
gputopo_source_up 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gputopo_source_up"); err != nil {
		t.Error(err)
	}
	// Only the two source metrics: no stale device series.
	if got := testutil.CollectAndCount(c); got != 2 {
		t.Errorf("%d series after a failed read, want 2", got)
	}
	if logged == nil || !strings.Contains(logged.Error(), "driver not loaded") {
		t.Errorf("logged %v", logged)
	}
	// A source answering without a topology is an error too.
	c = collector.New(fakeSource{r: &collector.Reading{}}, collector.Options{})
	if got := testutil.CollectAndCount(c, "gputopo_device_info"); got != 0 {
		t.Errorf("device metrics without a topology: %d", got)
	}
}

func TestCollectorAMDNoReadings(t *testing.T) {
	// A static topology: no live readings, no MIG. Memory capacity comes
	// from the topology; nothing is reported as used, busy or hot.
	n := node(t, "mi250x-8gcd")
	c := collector.New(fakeSource{r: &collector.Reading{Node: n}}, collector.Options{})
	for name, want := range map[string]int{
		"gputopo_device_memory_total_bytes": 8, "gputopo_device_memory_used_bytes": 0,
		"gputopo_device_utilization_ratio": 0, "gputopo_device_memory_utilization_ratio": 0, "gputopo_device_temperature_celsius": 0,
		"gputopo_mig_free_slots": 0, "gputopo_mig_node_fragmentation_ratio": 0, "gputopo_device_info": 8,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
	// MI250X: the xGMI mesh connects all eight GCDs.
	adjWant := `
# HELP gputopo_free_fabric_connected_devices Size of the largest set of free devices connected through fabric links among free devices.
# TYPE gputopo_free_fabric_connected_devices gauge
gputopo_free_fabric_connected_devices 8
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(adjWant), "gputopo_free_fabric_connected_devices"); err != nil {
		t.Error(err)
	}
}

func TestCollectorLint(t *testing.T) {
	c := collector.New(fakeSource{r: h100Reading(t)}, collector.Options{ConstLabels: prometheus.Labels{"node": "gpu-01"}})
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// The pedantic registry checks that what is collected matches what is
	// described.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
