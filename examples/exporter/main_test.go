package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gputopo/gputopo/examples/exporter/collector"
	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/nvidia/nvidiatest"
	"github.com/gputopo/gputopo/provider/nvidia/nvml"
)

// TestServeMetrics scrapes the HTTP handler as Prometheus would, with a
// reference machine as the source.
func TestServeMetrics(t *testing.T) {
	src, _, err := newSource("catalog:dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(collector.New(src, collector.Options{ConstLabels: prometheus.Labels{"node": "n1"}}), 1))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`gputopo_source_up{node="n1"} 1`,
		`gputopo_node_devices{node="n1"} 8`,
		`gputopo_free_fabric_clique_devices{node="n1"} 8`,
		`gputopo_best_free_set_score{gpus="8",node="n1"}`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestREADMEDocumentsEveryMetric: every metric the collector describes is
// named in README.md, and the README names no metric that does not exist.
func TestREADMEDocumentsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 64)
	collector.New(nil, collector.Options{}).Describe(ch)
	close(ch)
	var names []string
	re := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names = append(names, m[1])
		if !strings.Contains(string(readme), "`"+m[1]+"`") {
			t.Errorf("README.md does not document %s", m[1])
		}
	}
	for _, m := range regexp.MustCompile("`(gputopo_[a-z_]+)`").FindAllStringSubmatch(string(readme), -1) {
		if !slices.Contains(names, m[1]) {
			t.Errorf("README.md documents %s, which the collector does not export", m[1])
		}
	}
}

func TestFlagsAndSources(t *testing.T) {
	for _, bad := range []string{"acme", "file:", "catalog:no-such-machine"} {
		if _, _, err := newSource(bad); err == nil {
			t.Errorf("source %q accepted", bad)
		}
	}
	mix, err := parseMix("3g.40gb=2, 1g.10gb=5")
	if err != nil || mix["3g.40gb"] != 2 || mix["1g.10gb"] != 5 {
		t.Errorf("mix %v %v", mix, err)
	}
	for _, bad := range []string{"3g.40gb", "3g.40gb=x", "3g.40gb=-1", "3g.40gb=NaN", "3g.40gb=+Inf", "3g.40gb=1e308,1g.10gb=1e308"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("mix %q accepted", bad)
		}
	}
	if m, err := parseMix(""); err != nil || m != nil {
		t.Errorf("empty mix: %v %v", m, err)
	}
	var _ mig.Mix = mix
	for _, args := range [][]string{{"-source", "acme"}, {"-no-such-flag"}, {"-refresh", "0s"}, {"-refresh", "-1s"}, {"-max-in-flight", "0"}, {"-mig-mix", "x"}} {
		if err := run(context.Background(), args, log.New(io.Discard, "", 0)); err == nil {
			t.Errorf("run accepted %q", args)
		}
	}
	// A file source that does not exist fails at read time, reported as
	// gputopo_source_up 0 rather than at start-up.
	src, _, err := newSource("file:/nonexistent/node.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Read(context.Background()); err == nil {
		t.Error("reading a missing file succeeded")
	}
}

// TestReadingFromInventory converts what the NVIDIA provider reports: a
// DGX H100 whose GPU 0 has memory readings and whose GPU 1 is in MIG mode
// with no instances yet (all eight slices free).
func TestReadingFromInventory(t *testing.T) {
	n, err := catalog.Get("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	gpus := make([]nvidia.GPU, n.Len())
	for i := range gpus {
		gpus[i] = nvidia.GPU{Index: i, Name: n.Device(i).Model}
	}
	gpus[0].Memory = nvml.MemoryInfo{Total: 80 << 30, Used: 5 << 30}
	gpus[1].MIG = nvidia.MIG{Capable: true, Enabled: true}
	r, err := readingFromInventory(&nvidia.Inventory{Node: n, GPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Devices[0]; !d.HasMemory || d.MemoryTotal != 80<<30 || d.MemoryUsed != 5<<30 {
		t.Errorf("GPU 0 reading %+v", d)
	}
	if r.Devices[2].HasMemory {
		t.Error("GPU 2 has memory readings it was not given")
	}
	if len(r.MIG) != 1 || r.MIG[0].Device != 1 || r.MIG[0].Layout.FreeSlots() != 8 {
		t.Fatalf("MIG readings %+v", r.MIG)
	}
	c := collector.New(collector.SourceFunc(func(context.Context) (*collector.Reading, error) { return r, nil }), collector.Options{})
	if got := testutil.CollectAndCount(c, "gputopo_mig_free_placements"); got != 7 {
		t.Errorf("%d free-placement series for GPU 1's 7 profiles", got)
	}
}

// TestNVIDIAReadings runs the NVIDIA source over a fake NVML answering like
// a DGX H100 and scrapes the utilisation and temperature series: GPU 0 is
// busy, GPU 1 is in MIG mode (NVML gives no device utilisation there),
// GPU 2 has neither reading (not supported), GPU 3's reads fail, the rest
// are idle. Only readings NVML gave are exported, never a zero in place of
// a missing one.
func TestNVIDIAReadings(t *testing.T) {
	n, err := catalog.Get("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	fake := nvidiatest.FromNode(n)
	fake.GPUs[0].Utilization = &nvml.Utilization{GPU: 97, Memory: 41}
	fake.GPUs[0].TemperatureC = new(64)
	fake.GPUs[1].MIG.Enabled = true
	fake.GPUs[2].Utilization, fake.GPUs[2].TemperatureC = nil, nil
	fake.GPUs[3].UtilizationErr, fake.GPUs[3].TemperatureErr = nvml.CodeUnknown, nvml.CodeTimeout
	p := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs())
	c := collector.New(&nvidiaSource{p: p}, collector.Options{})

	type want struct {
		util, memUtil, temp string // "" = no series
	}
	wants := []want{
		0: {"0.97", "0.41", "64"},
		1: {"", "", "30"},
		2: {},
		3: {},
		4: {"0", "0", "30"}, 5: {"0", "0", "30"}, 6: {"0", "0", "30"}, 7: {"0", "0", "30"},
	}
	var util, memUtil, temp strings.Builder
	for i, w := range wants {
		labels := `{device="` + strconv.Itoa(i) + `",uuid="` + fake.GPUs[i].UUID + `"}`
		for _, s := range []struct {
			b *strings.Builder
			v string
		}{{&util, w.util}, {&memUtil, w.memUtil}, {&temp, w.temp}} {
			if s.v != "" {
				s.b.WriteString(labels + " " + s.v + "\n")
			}
		}
	}
	expected := `
# HELP gputopo_device_utilization_ratio Share of time the device was busy over the provider's sample period (0..1).
# TYPE gputopo_device_utilization_ratio gauge
` + prefixed("gputopo_device_utilization_ratio", util.String()) + `
# HELP gputopo_device_memory_utilization_ratio Share of time device memory was being read or written over the provider's sample period (0..1); not the share of capacity in use.
# TYPE gputopo_device_memory_utilization_ratio gauge
` + prefixed("gputopo_device_memory_utilization_ratio", memUtil.String()) + `
# HELP gputopo_device_temperature_celsius Device temperature.
# TYPE gputopo_device_temperature_celsius gauge
` + prefixed("gputopo_device_temperature_celsius", temp.String())
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected),
		"gputopo_device_utilization_ratio", "gputopo_device_memory_utilization_ratio", "gputopo_device_temperature_celsius"); err != nil {
		t.Error(err)
	}
	// The failed reads are in the inventory's warnings, and the GPU is
	// still healthy and counted.
	inv, err := p.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, w := range inv.Warnings {
		if strings.HasPrefix(w, "GPU 3:") {
			failed = append(failed, w)
		}
	}
	if len(failed) != 2 {
		t.Errorf("GPU 3 warnings %q, want the failed utilisation and temperature reads", failed)
	}
	var healthy strings.Builder
	for i := range wants {
		healthy.WriteString(`{device="` + strconv.Itoa(i) + `",uuid="` + fake.GPUs[i].UUID + "\"} 1\n")
	}
	expected = `
# HELP gputopo_device_healthy 1 when the device can take work, 0 when the provider marked it unhealthy.
# TYPE gputopo_device_healthy gauge
` + prefixed("gputopo_device_healthy", healthy.String())
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), "gputopo_device_healthy"); err != nil {
		t.Error(err)
	}
	// A source whose whole read fails exports no device series at all.
	fake.InitErr = nvml.CodeDriverNotLoaded
	if got := testutil.CollectAndCount(c, "gputopo_device_utilization_ratio", "gputopo_device_temperature_celsius"); got != 0 {
		t.Errorf("%d reading series after a failed read", got)
	}
	expected = `
# HELP gputopo_source_up 1 when the last read of the device source succeeded, 0 when it failed.
# TYPE gputopo_source_up gauge
gputopo_source_up 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected), "gputopo_source_up"); err != nil {
		t.Error(err)
	}
}

// TestNVIDIAMIGInstanceMemory runs the NVIDIA source over a fake DGX H100
// whose GPU 1 is in MIG mode with a 3g.40gb instance at slice 0 (memory
// read: 30 GiB of 40320 MiB used) and 1g.10gb instances at 4 (NVML: not
// supported), 5 (the read fails) and 6 (read: the fake's default, its
// profile's 9984 MiB, none used). Used memory is exported only where it
// was read; the total is the read one, else the profile's.
func TestNVIDIAMIGInstanceMemory(t *testing.T) {
	n, err := catalog.Get("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	fake := nvidiatest.FromNode(n)
	g := fake.GPUs[1].MIG
	g.Enabled = true
	for _, in := range [][3]int{{2, 0, 4}, {0, 4, 1}, {0, 5, 1}, {0, 6, 1}} { // NVML profile index, start, size
		if err := fake.AddInstance(1, in[0], mig.Placement{Start: in[1], Size: in[2]}); err != nil {
			t.Fatal(err)
		}
	}
	g.InstanceMemory = map[int]nvml.MemoryInfo{0: {Total: 40320 << 20, Used: 30 << 30, Free: 40320<<20 - 30<<30}}
	g.InstanceMemoryErr = map[int]error{4: nvml.CodeNotSupported, 5: nvml.CodeUnknown}
	p := nvidia.New(nvidia.WithLibrary(fake), nvidia.WithoutSysfs())
	c := collector.New(&nvidiaSource{p: p}, collector.Options{})
	expected := `
# HELP gputopo_mig_instance_memory_total_bytes Memory of a MIG instance (as the provider read it, else from its profile).
# TYPE gputopo_mig_instance_memory_total_bytes gauge
gputopo_mig_instance_memory_total_bytes{device="1",profile="1g.10gb",start="4"} ` + strconv.Itoa(9984<<20) + `
gputopo_mig_instance_memory_total_bytes{device="1",profile="1g.10gb",start="5"} ` + strconv.Itoa(9984<<20) + `
gputopo_mig_instance_memory_total_bytes{device="1",profile="1g.10gb",start="6"} ` + strconv.Itoa(9984<<20) + `
gputopo_mig_instance_memory_total_bytes{device="1",profile="3g.40gb",start="0"} ` + strconv.Itoa(40320<<20) + `
# HELP gputopo_mig_instance_memory_used_bytes Memory in use in a MIG instance.
# TYPE gputopo_mig_instance_memory_used_bytes gauge
gputopo_mig_instance_memory_used_bytes{device="1",profile="1g.10gb",start="6"} 0
gputopo_mig_instance_memory_used_bytes{device="1",profile="3g.40gb",start="0"} ` + strconv.Itoa(30<<30) + `
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(expected),
		"gputopo_mig_instance_memory_total_bytes", "gputopo_mig_instance_memory_used_bytes"); err != nil {
		t.Error(err)
	}
	// The failed read is a warning in the inventory; not-supported is
	// silent; GPU 1 stays healthy and its layout is exported.
	inv, err := p.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range inv.Warnings {
		if strings.HasPrefix(w, "GPU 1:") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "memory of MIG GPU instance") || !strings.Contains(warned[0], nvml.CodeUnknown.Error()) {
		t.Errorf("GPU 1 warnings %q, want the one failed instance memory read", warned)
	}
	if got := testutil.CollectAndCount(c, "gputopo_mig_instance_info"); got != 4 {
		t.Errorf("%d MIG instance series, want 4", got)
	}
	// A source whose read fails exports no instance memory at all.
	fake.InitErr = nvml.CodeDriverNotLoaded
	if got := testutil.CollectAndCount(c, "gputopo_mig_instance_memory_total_bytes", "gputopo_mig_instance_memory_used_bytes"); got != 0 {
		t.Errorf("%d instance memory series after a failed read", got)
	}
}

// prefixed puts name before every line of series.
func prefixed(name, series string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(series, "\n"), "\n") {
		if l != "" {
			b.WriteString(name + l + "\n")
		}
	}
	return b.String()
}
