package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

// scaleConfig has two profiles in one scheduler: the default one, and
// "gputopo", the default plugins plus GPUTopology at every extension
// point it implements (score weight 10, as the README suggests), binding
// GPU pods itself with the device annotations in the Binding
// (bindWithAnnotations; GPUTopology listed first under bind) so each pod
// costs one write. The client's rate limit is lifted (as scheduler_perf
// does).
const scaleConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: gputopo
  plugins:
    multiPoint:
      enabled:
      - name: GPUTopology
        weight: 10
      - name: GPUTopologyGang
    bind:
      enabled:
      - name: GPUTopology
  pluginConfig:
  - name: GPUTopology
    args:
      permitTimeoutSeconds: 30
      bindWithAnnotations: true
`

// scaleShapes are the catalogue machines the scale nodes cycle through
// (the NVIDIA ones: the pods ask for nvidia.com/gpu).
var scaleShapes = []string{"dgx-h100", "dgx-a100", "hgx-b200", "dgx1-v100", "pcie-8gpu-2numa",
	"dgx-h200", "gb200-nvl72-tray", "workstation-2gpu-nvlink"}

// TestScale is the scale benchmark (in the spirit of kube-scheduler's
// scheduler_perf): one in-process control plane grown to 200, 1,000 and
// 5,000 nodes of mixed catalogue shapes with real topology annotations;
// at each size the same pods (single GPUs, 2 and 4 GPUs with a scope, 8
// GPUs, GPU shares) are scheduled by the gputopo profile, deleted, and
// scheduled again by the default profile. It reports pods per second and
// the scheduler's own extension-point and GPUTopology plugin latencies
// (p50/p99 from its histograms, deltas over each run). Plugin latencies
// are sampled by kube-scheduler (10% of cycles, a constant).
//
// It runs only with GPUTOPO_SCALE=1 (minutes, several GiB);
// GPUTOPO_SCALE_SIZES overrides the sizes ("200,1000"),
// GPUTOPO_SCALE_GANGS=1 makes about a tenth of the pods gang members
// (withGangs),
// GPUTOPO_SCALE_ROUNDS=N runs the pair of profiles N times per size
// (alternating which goes first), GPUTOPO_SCALE_RATE=R creates the pods
// at R per second instead of all at once (latencies below saturation),
// and GPUTOPO_SCALE_PROFILE=DIR writes a CPU profile of each run there.
func TestScale(t *testing.T) {
	if os.Getenv("GPUTOPO_SCALE") != "1" {
		t.Skip("set GPUTOPO_SCALE=1 to run the scale benchmark")
	}
	sizes := []int{200, 1000, 5000}
	if s := os.Getenv("GPUTOPO_SCALE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(t, err)
			sizes = append(sizes, n)
		}
	}
	gangs := os.Getenv("GPUTOPO_SCALE_GANGS") == "1"
	rounds := 1
	if s := os.Getenv("GPUTOPO_SCALE_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.Positive(t, n)
		rounds = n
	}
	rate := 0.0 // pods created per second; 0: as fast as 16 clients can
	if s := os.Getenv("GPUTOPO_SCALE_RATE"); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		require.Positive(t, r)
		rate = r
	}
	cp := startControlPlaneConfig(t, scaleConfig)
	cfg := rest.CopyConfig(cp.config)
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	var results []scaleResult
	created := 0
	for _, size := range sizes {
		start := time.Now()
		createScaleNodes(t, client, created, size)
		created = size
		waitSchedulerSees(t, cp, fmt.Sprintf("scale-%05d", size-1), "scale")
		t.Logf("%d nodes ready in %v", size, time.Since(start).Round(time.Second))
		pods := scalePods(size)
		if gangs {
			pods = withGangs(pods, size)
		}
		for round := range rounds {
			// Alternate which profile goes first (gputopo, default,
			// default, gputopo, ...), so neither always runs on a cluster
			// just created.
			order := []string{"gputopo", "default-scheduler"}
			if round%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, profile := range order {
				r := runScale(t, client, profile, size, pods, round, rate)
				if gangs {
					r.profile += " (gangs)"
				}
				if rate > 0 {
					r.profile += fmt.Sprintf(" (paced %g/s)", rate)
				}
				results = append(results, r)
			}
		}
	}
	t.Log("\n" + scaleTable(results))
}

// schedulerConfigOverride, when set, is the scheduler configuration
// startScheduler writes instead of schedulerConfig: a format whose one
// verb is the kubeconfig path (%q).
var schedulerConfigOverride string

// startControlPlaneConfig is startControlPlane with a scheduler
// configuration of the caller's (a format with one %q: the kubeconfig).
func startControlPlaneConfig(t *testing.T, config string) *controlPlane {
	t.Helper()
	schedulerConfigOverride = config
	t.Cleanup(func() { schedulerConfigOverride = "" })
	return startControlPlane(t, 0)
}

func createScaleNodes(t *testing.T, client kubernetes.Interface, from, to int) {
	t.Helper()
	type shape struct {
		labels, annotations map[string]string
		gpus                int
	}
	shapes := make([]shape, len(scaleShapes))
	for i, name := range scaleShapes {
		n, err := catalog.Get(name)
		require.NoError(t, err)
		l, a, err := kube.Metadata(n)
		require.NoError(t, err)
		shapes[i] = shape{l, a, n.Len()}
	}
	errs := make(chan error, to-from)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				s := shapes[i%len(shapes)]
				errs <- createScaleNode(client, fmt.Sprintf("scale-%05d", i), s.labels, s.annotations, s.gpus)
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func createScaleNode(client kubernetes.Interface, name string, labels, annotations map[string]string, gpus int) error {
	ctx := context.Background()
	labels = maps.Clone(labels)
	labels[scenarioLabel] = "scale"
	labels[v1.LabelHostname] = name
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	node, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("128"),
		v1.ResourceMemory: resource.MustParse("1Ti"),
		v1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":  *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// scalePod is one pod of the benchmark's mix.
type scalePod struct {
	gpus        int
	labels      map[string]string // gang labels (withGangs)
	annotations map[string]string
}

// scalePods is the benchmark's pod mix for a cluster of n nodes
// (deterministic): 50% one GPU, 25% 2 or 4 GPUs with a numa, pcie or
// fabric scope (required or preferred), 15% 8 GPUs, 10% GPU shares;
// 1.5 pods per node, at most 3,000.
func scalePods(n int) []scalePod {
	rng := rand.New(rand.NewPCG(uint64(n), 13))
	count := min(3000, n*3/2)
	out := make([]scalePod, count)
	for i := range out {
		switch r := rng.IntN(100); {
		case r < 50:
			out[i] = scalePod{gpus: 1}
		case r < 75:
			scope := []string{"numa", "pcie", "fabric"}[rng.IntN(3)]
			mode := []string{"required", "preferred"}[rng.IntN(2)]
			out[i] = scalePod{gpus: 2 << rng.IntN(2), annotations: map[string]string{
				plugin.AnnotationScope: scope, plugin.AnnotationScopeMode: mode}}
		case r < 90:
			out[i] = scalePod{gpus: 8}
		default:
			out[i] = scalePod{annotations: map[string]string{
				plugin.AnnotationSharedMemory:  []string{"4Gi", "10Gi", "20Gi"}[rng.IntN(3)],
				plugin.AnnotationSharedCompute: []string{"100m", "250m", "500m"}[rng.IntN(3)]}}
		}
	}
	return out
}

// scaleResult is one profile's run at one cluster size.
type scaleResult struct {
	profile       string
	nodes, pods   int
	bound         int
	elapsed       time.Duration
	t90           time.Duration         // until 90% of the pods that bound had bound
	extension     map[string][2]float64 // extension point -> p50, p99 (s)
	plugin        map[string][2]float64 // GPUTopology extension point -> p50, p99 (s)
	pluginSamples map[string]uint64
	binder        [2]float64 // DefaultBinder's Bind p50, p99 (s)
	binderSamples uint64
	attempt       [2]float64 // scheduling attempt p50, p99 (s)
	// attempts counts scheduling attempts by result (scheduled,
	// unschedulable, error): retries of pods that stay pending show here.
	attempts map[string]uint64
	// batching counts kube-scheduler's opportunistic batching outcomes
	// (a "hint_used" cycle skips the full Filter and Score pass).
	batching map[string]int
	// cpu is the whole test process's CPU time (etcd, kube-apiserver,
	// kube-scheduler, the clients creating pods) from the first create to
	// the last bind.
	cpu time.Duration
}

// cpuPerPod is the process's CPU time per bound pod: what a profile costs
// whatever else the machine is doing (throughput on a loaded machine
// depends on the load; CPU per pod much less).
func (r scaleResult) cpuPerPod() time.Duration {
	if r.bound == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.bound)
}

// processCPU is the test process's user plus system CPU time so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r scaleResult) podsPerSecond() float64 { return float64(r.bound) / r.elapsed.Seconds() }

// podsPerSecond90 is the rate until 90% of the pods that bound had bound:
// it leaves out the tail of pods that bind only after a retry backoff.
func (r scaleResult) podsPerSecond90() float64 {
	return float64(r.bound*9/10) / r.t90.Seconds()
}

func (r scaleResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d nodes, %d/%d pods bound in %v: %.1f pods/s (first 90%%: %.1f pods/s); CPU %v (%.2f ms per pod); attempts %v; batching %v; attempt p50 %s p99 %s",
		r.profile, r.nodes, r.bound, r.pods, r.elapsed.Round(time.Millisecond), r.podsPerSecond(), r.podsPerSecond90(),
		r.cpu.Round(time.Millisecond), float64(r.cpuPerPod())/1e6, r.attempts, r.batching, ms(r.attempt[0]), ms(r.attempt[1]))
	for _, ep := range slices.Sorted(maps.Keys(r.extension)) {
		fmt.Fprintf(&b, "; %s p50 %s p99 %s", ep, ms(r.extension[ep][0]), ms(r.extension[ep][1]))
	}
	for _, ep := range slices.Sorted(maps.Keys(r.plugin)) {
		fmt.Fprintf(&b, "; GPUTopology %s p50 %s p99 %s (%d samples)", ep, ms(r.plugin[ep][0]), ms(r.plugin[ep][1]), r.pluginSamples[ep])
	}
	if r.binderSamples > 0 {
		fmt.Fprintf(&b, "; DefaultBinder Bind p50 %s p99 %s (%d samples)", ms(r.binder[0]), ms(r.binder[1]), r.binderSamples)
	}
	return b.String()
}

func ms(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return fmt.Sprintf("%.2fms", s*1000)
}

// runScale creates the pods for one profile (rate per second when rate
// is positive, else all at once), waits until every pod that can be
// placed is bound (no progress for 10 s ends the wait), reads the
// scheduler's histograms, and deletes the pods.
func runScale(t *testing.T, client kubernetes.Interface, profile string, nodes int, pods []scalePod, round int, rate float64) scaleResult {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("scale-%d-%s-%d", nodes, profile, round)
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var bound, unannotated atomic.Int64
	var lastBind atomic.Int64
	var timesMu sync.Mutex
	var times []time.Time
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*v1.Pod), newObj.(*v1.Pod)
			if o.Spec.NodeName == "" && n.Spec.NodeName != "" {
				now := time.Now()
				if profile == "gputopo" && n.Annotations[plugin.AnnotationDevices] == "" {
					unannotated.Add(1) // the binding must carry the devices
				}
				bound.Add(1)
				lastBind.Store(now.UnixNano())
				timesMu.Lock()
				times = append(times, now)
				timesMu.Unlock()
			}
		},
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	before, batchBefore := gatherHistograms(t, scaleHistograms), gatherBatching(t, profile)
	stopProfile := func() {}
	if dir := os.Getenv("GPUTOPO_SCALE_PROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d-%s-%d.pprof", nodes, profile, round)))
		require.NoError(t, err)
		require.NoError(t, pprof.StartCPUProfile(f))
		runtime.SetMutexProfileFraction(5)
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
			// The mutex profile is cumulative over the process.
			if m, err := os.Create(filepath.Join(dir, fmt.Sprintf("mutex-%d-%s-%d.pprof", nodes, profile, round))); err == nil {
				_ = pprof.Lookup("mutex").WriteTo(m, 0)
				m.Close()
			}
		}
		defer func() { stopProfile() }() // on a failure before the end of the run
	}
	start, cpuStart := time.Now(), processCPU(t)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				createScalePod(t, client, ns, profile, i, pods[i])
			}
		})
	}
	for i := range pods {
		if rate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		}
		work <- i
	}
	close(work)
	wg.Wait()
	// Wait for binding to finish: all pods, or 10 s without progress.
	// The process's CPU time is read at each sign of progress, so the
	// quiet 10 s that end a run with unplaceable pods are not counted.
	last, lastChange, cpuEnd := int64(-1), time.Now(), processCPU(t)
	for {
		n := bound.Load()
		if n == int64(len(pods)) {
			cpuEnd = processCPU(t)
			break
		}
		if n != last {
			last, lastChange, cpuEnd = n, time.Now(), processCPU(t)
		} else if time.Since(lastChange) > 10*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopProfile() // the profile covers the run, not the deletions below
	stopProfile = func() {}
	end := time.Unix(0, lastBind.Load())
	if bound.Load() == 0 {
		end = time.Now()
	}
	after, batchAfter := gatherHistograms(t, scaleHistograms), gatherBatching(t, profile)
	require.Zero(t, unannotated.Load(), "%s: pods bound without their device annotation", profile)
	timesMu.Lock()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var t90 time.Duration
	if k := len(times) * 9 / 10; k > 0 {
		t90 = times[k-1].Sub(start)
	}
	timesMu.Unlock()
	r := scaleResult{profile: profile, nodes: nodes, pods: len(pods), bound: int(bound.Load()), elapsed: end.Sub(start), t90: t90, cpu: cpuEnd - cpuStart,
		extension: map[string][2]float64{}, plugin: map[string][2]float64{}, pluginSamples: map[string]uint64{}, attempts: map[string]uint64{}}
	for id, h := range after {
		key := parseSeriesID(id)
		d := h.minus(before[id])
		if d.count == 0 {
			continue
		}
		q := [2]float64{d.quantile(0.5), d.quantile(0.99)}
		switch {
		case key.name == "scheduler_framework_extension_point_duration_seconds" && key.labels["profile"] == profile &&
			key.labels["status"] == "Success":
			r.extension[key.labels["extension_point"]] = q
		case key.name == "scheduler_plugin_execution_duration_seconds" && (key.labels["plugin"] == plugin.Name || key.labels["plugin"] == plugin.GangName) &&
			profile == "gputopo":
			ep := key.labels["extension_point"] + "/" + key.labels["status"]
			r.plugin[ep], r.pluginSamples[ep] = q, d.count
		case key.name == "scheduler_plugin_execution_duration_seconds" && key.labels["plugin"] == "DefaultBinder" &&
			key.labels["extension_point"] == "Bind" && key.labels["status"] == "Success":
			// The same binding write as GPUTopology's Bind, for comparison
			// (in the gputopo profile DefaultBinder binds only pods
			// without GPUs: none in this mix).
			r.binder, r.binderSamples = q, d.count
		case key.name == "scheduler_scheduling_attempt_duration_seconds" && key.labels["profile"] == profile:
			if key.labels["result"] == "scheduled" {
				r.attempt = q
			}
			r.attempts[key.labels["result"]] += d.count
		}
	}
	r.batching = map[string]int{}
	for k, v := range batchAfter {
		if d := int(v - batchBefore[k]); d > 0 {
			r.batching[k] = d
		}
	}
	t.Log(r.String())
	zero := int64(0)
	// One DeleteCollection of thousands of pods outlasts the API server's
	// request timeout on a slow machine: delete them one by one.
	del := make(chan int)
	var dwg sync.WaitGroup
	for range 16 {
		dwg.Go(func() {
			for i := range del {
				err := client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%05d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting pod %d: %v", i, err)
				}
			}
		})
	}
	for i := range pods {
		del <- i
	}
	close(del)
	dwg.Wait()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	}))
	time.Sleep(2 * time.Second) // let the scheduler's cache catch up
	return r
}

// withGangs turns about a tenth of the pods (and at most a tenth of the
// nodes' worth) into gangs of 8, 16, 32 or 64 members of 8 GPUs each, with
// a minimum of all members, spread over the run; each gang's members are
// contiguous, so they are created together. The default profile sees
// 8-GPU pods with labels it does not read.
func withGangs(pods []scalePod, nodes int) []scalePod {
	rng := rand.New(rand.NewPCG(uint64(nodes), 17))
	members, nodeBudget := len(pods)/10, nodes/10
	var sizes []int
	for members >= 8 && nodeBudget >= 8 {
		size := min([]int{8, 16, 32, 64}[rng.IntN(4)], members, nodeBudget)
		sizes = append(sizes, size)
		members -= size
		nodeBudget -= size
	}
	out := slices.Clone(pods)
	if len(sizes) == 0 {
		return out
	}
	spacing := len(out) / len(sizes)
	for g, size := range sizes {
		off := g*spacing + (spacing-min(size, spacing))/2
		name := fmt.Sprintf("gang%02d", g)
		for i := off; i < off+size && i < len(out); i++ {
			out[i] = scalePod{gpus: 8, labels: map[string]string{
				plugin.LabelGang: name, plugin.LabelGangMinCount: strconv.Itoa(size)}}
		}
	}
	return out
}

func createScalePod(t *testing.T, client kubernetes.Interface, ns, profile string, i int, sp scalePod) {
	c := v1.Container{Name: "main", Image: "registry.invalid/none:0",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}
	if sp.gpus > 0 {
		q := *resource.NewQuantity(int64(sp.gpus), resource.DecimalSI)
		c.Resources.Requests["nvidia.com/gpu"] = q
		c.Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: ns, Labels: sp.labels, Annotations: sp.annotations},
		Spec: v1.PodSpec{SchedulerName: profile, Containers: []v1.Container{c},
			NodeSelector: map[string]string{scenarioLabel: "scale"}},
	}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Error(err)
	}
}

// histKey names one histogram series.
type histKey struct {
	name   string
	labels map[string]string
	id     string
}

// hist is a histogram's cumulative bucket counts.
type hist struct {
	upper  []float64
	counts []uint64 // cumulative
	count  uint64
}

func (h hist) minus(o hist) hist {
	d := hist{upper: h.upper, counts: make([]uint64, len(h.counts)), count: h.count - o.count}
	for i := range h.counts {
		d.counts[i] = h.counts[i]
		if i < len(o.counts) {
			d.counts[i] -= o.counts[i]
		}
	}
	return d
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear interpolation inside the bucket that holds it (the last
// finite bound when it falls in the +Inf bucket).
func (h hist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	lower, prev := 0.0, uint64(0)
	for i, c := range h.counts {
		if float64(c) >= rank {
			if c == prev {
				return h.upper[i]
			}
			return lower + (h.upper[i]-lower)*(rank-float64(prev))/float64(c-prev)
		}
		lower, prev = h.upper[i], c
	}
	return lower
}

// gatherBatching returns kube-scheduler's opportunistic batching counters
// for a profile: attempts by result ("hint_used", "no_hint", ...) and
// cache flushes by reason ("flush:pod_incompatible", ...).
func gatherBatching(t *testing.T, profile string) map[string]float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		var prefix, label string
		switch mf.GetName() {
		case "scheduler_batch_attempts_total":
			label = "result"
		case "scheduler_batch_cache_flushed_total":
			prefix, label = "flush:", "reason"
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			var p, l string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "profile":
					p = lp.GetValue()
				case label:
					l = lp.GetValue()
				}
			}
			if p == profile {
				out[prefix+l] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// scaleHistograms are the scheduler histograms TestScale reports.
var scaleHistograms = []string{
	"scheduler_framework_extension_point_duration_seconds",
	"scheduler_plugin_execution_duration_seconds",
	"scheduler_scheduling_attempt_duration_seconds",
}

// gatherHistograms reads the named scheduler histograms from the
// in-process registry, one entry per series, keyed by the series' id (the
// name and its labels, parsed back by parseSeriesID).
func gatherHistograms(t *testing.T, names []string) map[string]hist {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	out := map[string]hist{}
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			// The series' id: the name and its labels.
			parts := []string{mf.GetName()}
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			h := hist{count: m.GetHistogram().GetSampleCount()}
			for _, b := range m.GetHistogram().GetBucket() {
				h.upper = append(h.upper, b.GetUpperBound())
				h.counts = append(h.counts, b.GetCumulativeCount())
			}
			out[strings.Join(parts, "|")] = h
		}
	}
	return out
}

func parseSeriesID(id string) histKey {
	parts := strings.Split(id, "|")
	k := histKey{name: parts[0], labels: map[string]string{}, id: id}
	for _, p := range parts[1:] {
		kv := strings.SplitN(p, "=", 2)
		k.labels[kv[0]] = kv[1]
	}
	return k
}

// scaleTable is the README's table: per size, both profiles' throughput,
// and the extension points' p50/p99.
func scaleTable(rs []scaleResult) string {
	var b strings.Builder
	b.WriteString("| nodes | pods | profile | bound | pods/s (all / first 90%) | CPU per pod | attempt p50 / p99 | PreFilter p99 | Filter p99 | Score p99 | Reserve p99 | PreBind p99 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		p99 := func(ep string) string {
			if q, ok := r.extension[ep]; ok {
				return ms(q[1])
			}
			return "-"
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %d | %.1f / %.1f | %.1f ms | %s / %s | %s | %s | %s | %s | %s |\n", r.nodes, r.pods, r.profile, r.bound,
			r.podsPerSecond(), r.podsPerSecond90(), float64(r.cpuPerPod())/1e6, ms(r.attempt[0]), ms(r.attempt[1]), p99("PreFilter"), p99("Filter"), p99("Score"),
			p99("Reserve"), p99("PreBind"))
	}
	b.WriteString("\nGPUTopology plugin (sampled cycles):\n\n| nodes | extension point/status | samples | p50 | p99 |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		for _, ep := range slices.Sorted(maps.Keys(r.plugin)) {
			fmt.Fprintf(&b, "| %d | %s | %d | %s | %s |\n", r.nodes, ep, r.pluginSamples[ep], ms(r.plugin[ep][0]), ms(r.plugin[ep][1]))
		}
	}
	return b.String()
}
