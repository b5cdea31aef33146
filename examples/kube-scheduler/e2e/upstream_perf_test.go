package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"

	"github.com/gputopo/gputopo/examples/kube-scheduler/plugin"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// The workloads of kube-scheduler's own benchmark harness
// (k8s.io/kubernetes/test/integration/scheduler_perf at the version this
// module requires), reproduced op by op on this package's control plane,
// with GPUs added: SchedulingBasic (misc/performance-config.yaml),
// GangScheduling (podgroup/gangscheduling) and TopologyAwareScheduling
// (podgroup/tas). docs/benchmarks.md lists what differs from upstream.

// upstreamPerfConfig has two profiles in one scheduler: the default one
// (in-tree GangScheduling, TopologyPlacementGenerator and placement
// scores under the pod-group feature gates), and "gputopo": the default
// plugins plus GPUTopology at every extension point it implements (as in
// scaleConfig: score weight 10, binding with the device annotations), its
// PlacementGenerate in place of TopologyPlacementGenerator and its
// PlacementScore (weight 5) beside the in-tree ones.
const upstreamPerfConfig = `apiVersion: kubescheduler.config.k8s.io/v1
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
    placementGenerate:
      disabled:
      - name: TopologyPlacementGenerator
    placementScore:
      enabled:
      - name: GPUTopologyGang
        weight: 5
  pluginConfig:
  - name: GPUTopology
    args:
      permitTimeoutSeconds: 30
      bindWithAnnotations: true
`

const (
	upstreamZoneLabel = "topology.kubernetes.io/zone"
	upstreamRackLabel = "topology.kubernetes.io/rack"
	upstreamGPU       = v1.ResourceName("nvidia.com/gpu")
)

// upstreamSizes are one run's parameters: upstream's workload params
// (initNodes, initPods, measurePods, initPodGroups, podsPerGroup) and the
// nodes per rack (upstream: 100).
type upstreamSizes struct {
	nodes, rackSize          int
	basicInit, basicMeasure  int
	gangGroups, gangPerGroup int
	tasGroups, tasPerGroup   int
}

// upstreamFull is upstream's 5,000-node workloads: SchedulingBasic
// 5000Nodes_10000Pods, GangScheduling 5000Nodes_1000Gangs_3000Pods,
// TopologyAwareScheduling 5000Nodes_750Gangs_3000Pods.
var upstreamFull = upstreamSizes{nodes: 5000, rackSize: 100, basicInit: 1000, basicMeasure: 10000,
	gangGroups: 1000, gangPerGroup: 3, tasGroups: 750, tasPerGroup: 4}

// upstreamSmoke is upstream's integration-test sizes (5Nodes for
// SchedulingBasic, 10Nodes_3Gangs for the others) on 10 nodes in two
// racks of 5.
var upstreamSmoke = upstreamSizes{nodes: 10, rackSize: 5, basicInit: 5, basicMeasure: 10,
	gangGroups: 3, gangPerGroup: 3, tasGroups: 3, tasPerGroup: 3}

// upstreamShape is the catalogue machine of node i (scaleShapes in turn).
func upstreamShape(t *testing.T, i int) *topology.Node {
	t.Helper()
	n, err := catalog.Get(scaleShapes[i%len(scaleShapes)])
	require.NoError(t, err)
	return n
}

// TestUpstreamPerf runs upstream's SchedulingBasic, GangScheduling and
// TopologyAwareScheduling workloads with the gputopo profile and the
// default one in one process, alternating which goes first each round,
// and reports pods per second (all pods over all seconds), the process's
// CPU per pod, pod-group attempt latencies, GPUTopology's own time per
// extension point (kube-scheduler's sampled plugin histogram; Bind, the
// API write, reported apart) and, for the topology-aware workload, the
// GPUs stranded and the slowest member link.
//
// By default it runs upstream's integration-test sizes once (seconds), so
// the harness is exercised in every CI run. GPUTOPO_UPSTREAM_PERF=1 runs
// the 5,000-node workloads (many minutes, several GiB);
// GPUTOPO_UPSTREAM_NODES=N scales them to N nodes (pods in proportion),
// GPUTOPO_UPSTREAM_BASIC_MEASURE=N sets SchedulingBasic's measurePods
// (1000: upstream's 5000Nodes workload; default 10000, its
// 5000Nodes_10000Pods), GPUTOPO_UPSTREAM_ROUNDS=N sets the rounds
// (default 4 at scale, 1 otherwise), GPUTOPO_UPSTREAM_WORKLOADS a subset
// ("basic,gang,tas") and GPUTOPO_UPSTREAM_PROFILE=DIR writes a CPU
// profile of each measured phase there.
func TestUpstreamPerf(t *testing.T) {
	sizes, rounds := upstreamSmoke, 1
	if os.Getenv("GPUTOPO_UPSTREAM_PERF") == "1" {
		sizes, rounds = upstreamFull, 4
		if s := os.Getenv("GPUTOPO_UPSTREAM_NODES"); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			require.Positive(t, n)
			sizes = upstreamFull.scaled(n)
		}
		if s := os.Getenv("GPUTOPO_UPSTREAM_BASIC_MEASURE"); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err)
			require.Positive(t, n)
			sizes.basicMeasure = n
		}
	}
	if s := os.Getenv("GPUTOPO_UPSTREAM_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.Positive(t, n)
		rounds = n
	}
	workloads := []string{"basic", "gang", "tas"}
	if s := os.Getenv("GPUTOPO_UPSTREAM_WORKLOADS"); s != "" {
		workloads = strings.Split(s, ",")
		for _, w := range workloads {
			require.Contains(t, []string{"basic", "gang", "tas"}, w)
		}
	}

	// Upstream's gang and topology-aware cases set these gates;
	// SchedulingBasic runs under them too here (one cluster for all).
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload: true, features.TopologyAwareWorkloadScheduling: true})
	cp := startAPIServerOnly(t, "--runtime-config=scheduling.k8s.io/v1beta1=true")
	startSchedulerConfig(t, cp, upstreamPerfConfig)
	cfg := rest.CopyConfig(cp.config)
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	start := time.Now()
	topos := createUpstreamNodes(t, client, sizes)
	waitSchedulerSees(t, cp, upstreamNodeName(sizes.nodes-1), "upstream")
	t.Logf("%d nodes ready in %v", sizes.nodes, time.Since(start).Round(time.Second))

	var runs []upstreamRun
	for round := range rounds {
		order := []string{"gputopo", "default-scheduler"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, w := range workloads {
			for _, profile := range order {
				r := runUpstream(t, client, topos, sizes, w, profile, round)
				t.Log(r.String())
				runs = append(runs, r)
			}
		}
	}
	for _, r := range runs {
		assert.Equal(t, r.pods, r.bound, "%s %s round %d: every pod binds", r.workload, r.profile, r.round)
		if r.workload == "tas" {
			assert.Zero(t, r.split, "%s %s round %d: every gang in one rack", r.workload, r.profile, r.round)
		}
	}
	t.Log("\n" + upstreamTable(runs))
}

// scaled is s for n nodes, the pods in proportion (at least one gang).
func (s upstreamSizes) scaled(n int) upstreamSizes {
	f := func(k int) int { return max(1, k*n/s.nodes) }
	return upstreamSizes{nodes: n, rackSize: s.rackSize, basicInit: f(s.basicInit), basicMeasure: f(s.basicMeasure),
		gangGroups: f(s.gangGroups), gangPerGroup: s.gangPerGroup, tasGroups: f(s.tasGroups), tasPerGroup: s.tasPerGroup}
}

func upstreamNodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// createUpstreamNodes creates upstream's TopologyAwareScheduling node
// template (node-<i>, hostname, zone and rack labels, 4 CPUs, 32Gi, 110
// pods, Ready) with each node's GPUs added: the nvidia.com/gpu extended
// resource and the topology labels and annotations of a catalogue
// machine. It returns each node's topology by name.
func createUpstreamNodes(t *testing.T, client kubernetes.Interface, s upstreamSizes) map[string]*topology.Node {
	t.Helper()
	type meta struct{ labels, annotations map[string]string }
	metas := make([]meta, len(scaleShapes))
	for i := range scaleShapes {
		l, a, err := kube.Metadata(upstreamShape(t, i))
		require.NoError(t, err)
		metas[i] = meta{l, a}
	}
	topos := map[string]*topology.Node{}
	for i := range s.nodes {
		topos[upstreamNodeName(i)] = upstreamShape(t, i)
	}
	errs := make(chan error, s.nodes)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				m, name := metas[i%len(metas)], upstreamNodeName(i)
				labels := maps.Clone(m.labels)
				labels[v1.LabelHostname] = name
				labels[upstreamZoneLabel] = fmt.Sprintf("zone-%d", i/s.rackSize)
				labels[upstreamRackLabel] = fmt.Sprintf("rack-%d", i/s.rackSize)
				labels[scenarioLabel] = "upstream" // for waitSchedulerSees
				errs <- createUpstreamNode(client, name, labels, m.annotations, topos[name].Len())
			}
		})
	}
	for i := range s.nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return topos
}

func createUpstreamNode(client kubernetes.Interface, name string, labels, annotations map[string]string, gpus int) error {
	ctx := context.Background()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	node, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
		upstreamGPU:       *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	node.Status.Phase = v1.NodeRunning
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// upstreamPod is upstream's pod template for a workload with GPUs added:
// SchedulingBasic's pod-default.yaml (pause, port 80, 100m CPU and 500Mi
// as requests and limits) with one GPU; the gang template (100m, 100Mi,
// spec.schedulingGroup naming gang-<i/podsPerGroup>) with one GPU; the
// topology-aware template (the same) with two GPUs and a preferred NUMA
// scope.
func upstreamPod(workload, ns, profile string, i, perGroup int) *v1.Pod {
	res := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"),
		v1.ResourceMemory: resource.MustParse("100Mi"), upstreamGPU: resource.MustParse("1")},
		Limits: v1.ResourceList{upstreamGPU: resource.MustParse("1")}}
	c := v1.Container{Name: "pause", Image: "registry.k8s.io/pause:3.10.1"}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: v1.PodSpec{SchedulerName: profile}}
	switch workload {
	case "basic":
		pod.Name = fmt.Sprintf("pod-%d", i)
		c.Image = "registry.k8s.io/pause:3.10.2"
		c.Ports = []v1.ContainerPort{{ContainerPort: 80}}
		res.Requests[v1.ResourceMemory] = resource.MustParse("500Mi")
		res.Limits[v1.ResourceCPU] = resource.MustParse("100m")
		res.Limits[v1.ResourceMemory] = resource.MustParse("500Mi")
	case "gang", "tas":
		pod.Name = fmt.Sprintf("test-%s-scheduling-%d", workload, i)
		group := fmt.Sprintf("gang-%d", i/perGroup)
		pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &group}
		if workload == "tas" {
			res.Requests[upstreamGPU], res.Limits[upstreamGPU] = resource.MustParse("2"), resource.MustParse("2")
			pod.Annotations = map[string]string{plugin.AnnotationScope: "numa", plugin.AnnotationScopeMode: "preferred"}
		}
	}
	c.Resources = res
	pod.Spec.Containers = []v1.Container{c}
	return pod
}

// upstreamPodGroup is upstream's podgroup.yaml: gang-<i>, gang policy of
// minCount perGroup, and for the topology-aware workload one topology
// constraint on the rack label.
func upstreamPodGroup(workload, ns string, i, perGroup int) *schedv1beta1.PodGroup {
	pg := &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gang-%d", i), Namespace: ns},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(perGroup)}}}}
	if workload == "tas" {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedv1beta1.TopologyConstraint{{Key: upstreamRackLabel}}}
	}
	return pg
}

// upstreamRun is one workload's measured phase under one profile.
type upstreamRun struct {
	workload, profile string
	round             int
	pods, bound       int
	elapsed           time.Duration // first create to last bind
	cpu               time.Duration // the process's CPU over the same span
	attempts          map[string]uint64
	// group is the pod-group attempt latency p50/p99 (result
	// scheduled) and groupAttempts the attempts by result.
	group         [2]float64
	groupAttempts map[string]uint64
	// plugin is GPUTopology's own time per extension point/status
	// (p50, p99) and pluginSamples the sampled calls.
	plugin        map[string][2]float64
	pluginSamples map[string]uint64
	// For the topology-aware workload: free GPUs on nodes in use in
	// part, gangs whose members span racks, the slowest link of any
	// member (GB/s) and the mean over gangs of each gang's slowest link.
	stranded, split int
	slowest, mean   float64
	modelled        bool // devices modelled (lowest free indices): the profile writes none
}

func (r upstreamRun) podsPerSecond() float64 { return float64(r.bound) / r.elapsed.Seconds() }

func (r upstreamRun) cpuPerPod() time.Duration {
	if r.bound == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.bound)
}

// ownMaxP99 is the largest p99 of GPUTopology's own extension points
// (Bind, the API write, left out).
func (r upstreamRun) ownMaxP99() float64 {
	m := math.NaN()
	for ep, q := range r.plugin {
		if strings.HasPrefix(ep, "Bind/") {
			continue
		}
		if math.IsNaN(m) || q[1] > m {
			m = q[1]
		}
	}
	return m
}

func (r upstreamRun) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s round %d: %d/%d pods bound in %v: %.1f pods/s; CPU %v (%.2f ms per pod); attempts %v",
		r.workload, r.profile, r.round, r.bound, r.pods, r.elapsed.Round(time.Millisecond), r.podsPerSecond(),
		r.cpu.Round(time.Millisecond), float64(r.cpuPerPod())/1e6, r.attempts)
	if len(r.groupAttempts) > 0 {
		fmt.Fprintf(&b, "; pod-group attempts %v p50 %s p99 %s", r.groupAttempts, ms(r.group[0]), ms(r.group[1]))
	}
	for _, ep := range slices.Sorted(maps.Keys(r.plugin)) {
		fmt.Fprintf(&b, "; GPUTopology %s p50 %s p99 %s (%d samples)", ep, ms(r.plugin[ep][0]), ms(r.plugin[ep][1]), r.pluginSamples[ep])
	}
	if r.workload == "tas" {
		fmt.Fprintf(&b, "; %d GPUs stranded, %d gangs split, slowest member link %.0f GB/s (mean of gangs %.1f)",
			r.stranded, r.split, r.slowest, r.mean)
		if r.modelled {
			b.WriteString(" (devices modelled)")
		}
	}
	return b.String()
}

// createUpstreamPods creates pods [from, to) of a workload with 16 clients.
func createUpstreamPods(t *testing.T, client kubernetes.Interface, workload, ns, profile string, from, to, perGroup int) {
	t.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if _, err := client.CoreV1().Pods(ns).Create(context.Background(), upstreamPod(workload, ns, profile, i, perGroup), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// waitUpstreamBound waits until n pods have bound, or 10 s pass without
// progress; it returns the process's CPU time at the last progress.
func waitUpstreamBound(t *testing.T, bound *atomic.Int64, n int) time.Duration {
	t.Helper()
	last, lastChange, cpu := int64(-1), time.Now(), processCPU(t)
	for {
		k := bound.Load()
		if k >= int64(n) {
			return processCPU(t)
		}
		if k != last {
			last, lastChange, cpu = k, time.Now(), processCPU(t)
		} else if time.Since(lastChange) > 10*time.Second {
			return cpu
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runUpstream runs one workload under one profile in a namespace of its
// own: the unmeasured ops (SchedulingBasic's initPods; the pod groups),
// then the measured createPods; it reads the scheduler's histograms
// around the measured phase, and deletes the pods and pod groups.
func runUpstream(t *testing.T, client kubernetes.Interface, topos map[string]*topology.Node, s upstreamSizes,
	workload, profile string, round int) upstreamRun {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("up-%s-%s-%d", workload, strings.TrimSuffix(profile, "-scheduler"), round)
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var bound atomic.Int64
	var lastBind atomic.Int64
	var mu sync.Mutex
	order := map[string][]string{} // node -> pods in bind order
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*v1.Pod), newObj.(*v1.Pod)
			if o.Spec.NodeName == "" && n.Spec.NodeName != "" {
				lastBind.Store(time.Now().UnixNano())
				mu.Lock()
				order[n.Spec.NodeName] = append(order[n.Spec.NodeName], n.Name)
				mu.Unlock()
				bound.Add(1)
			}
		},
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	var from, to, perGroup, groups int
	switch workload {
	case "basic":
		createUpstreamPods(t, client, workload, ns, profile, 0, s.basicInit, 1)
		waitUpstreamBound(t, &bound, s.basicInit)
		require.Equal(t, int64(s.basicInit), bound.Load(), "%s: the initial pods bind", profile)
		from, to = s.basicInit, s.basicInit+s.basicMeasure
	case "gang":
		groups, perGroup = s.gangGroups, s.gangPerGroup
	case "tas":
		groups, perGroup = s.tasGroups, s.tasPerGroup
	}
	if groups > 0 {
		createUpstreamPodGroups(t, client, workload, ns, groups, perGroup)
		from, to = 0, groups*perGroup
	}

	before := gatherHistograms(t, upstreamHistograms)
	boundBefore := bound.Load()
	stopProfile := func() {}
	if dir := os.Getenv("GPUTOPO_UPSTREAM_PROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%s-%s-%d.pprof", workload, profile, round)))
		require.NoError(t, err)
		require.NoError(t, pprof.StartCPUProfile(f))
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	start, cpuStart := time.Now(), processCPU(t)
	createUpstreamPods(t, client, workload, ns, profile, from, to, max(perGroup, 1))
	cpuEnd := waitUpstreamBound(t, &bound, to)
	stopProfile()
	after := gatherHistograms(t, upstreamHistograms)
	end := time.Unix(0, lastBind.Load())
	if bound.Load() == boundBefore {
		end = time.Now()
	}
	r := upstreamRun{workload: workload, profile: profile, round: round, pods: to - from, bound: int(bound.Load() - boundBefore),
		elapsed: end.Sub(start), cpu: cpuEnd - cpuStart, attempts: map[string]uint64{}, groupAttempts: map[string]uint64{},
		plugin: map[string][2]float64{}, pluginSamples: map[string]uint64{}}
	for id, h := range after {
		key := parseSeriesID(id)
		d := h.minus(before[id])
		if d.count == 0 {
			continue
		}
		q := [2]float64{d.quantile(0.5), d.quantile(0.99)}
		switch {
		case key.name == "scheduler_scheduling_attempt_duration_seconds" && key.labels["profile"] == profile:
			r.attempts[key.labels["result"]] += d.count
		case key.name == "scheduler_podgroup_scheduling_attempt_duration_seconds" && key.labels["profile"] == profile:
			if key.labels["result"] == "scheduled" {
				r.group = q
			}
			r.groupAttempts[key.labels["result"]] += d.count
		case key.name == "scheduler_plugin_execution_duration_seconds" && (key.labels["plugin"] == plugin.Name || key.labels["plugin"] == plugin.GangName) &&
			profile == "gputopo":
			ep := key.labels["extension_point"] + "/" + key.labels["status"]
			r.plugin[ep], r.pluginSamples[ep] = q, d.count
		}
	}
	if workload == "tas" {
		mu.Lock()
		upstreamPlacement(t, client, topos, s, ns, profile, order, &r)
		mu.Unlock()
	}
	deleteUpstream(t, client, ns, workload, s.basicInit+s.basicMeasure, to, groups)
	return r
}

func createUpstreamPodGroups(t *testing.T, client kubernetes.Interface, workload, ns string, groups, perGroup int) {
	t.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if _, err := client.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), upstreamPodGroup(workload, ns, i, perGroup), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range groups {
		work <- i
	}
	close(work)
	wg.Wait()
	// Upstream's createPodGroups waits for the scheduler's informer to
	// see the groups; this cluster has no other writer, a second does.
	time.Sleep(time.Second)
}

// upstreamPlacement fills r's placement quality from the bound pods: GPUs
// stranded (free GPUs on nodes in use in part), gangs that span racks,
// and member links. A profile that writes no device annotation (the
// default one) gets each node's lowest free device indices in bind
// order, as a kubelet without a preferred allocation may give.
func upstreamPlacement(t *testing.T, client kubernetes.Interface, topos map[string]*topology.Node, s upstreamSizes,
	ns, profile string, order map[string][]string, r *upstreamRun) {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	byName := map[string]*v1.Pod{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	devices := map[string][]int{} // pod -> devices
	used := map[string]int{}
	for node, pods := range order {
		next := 0
		for _, name := range pods {
			pod := byName[name]
			if pod == nil {
				continue
			}
			g := pod.Spec.Containers[0].Resources.Requests[upstreamGPU]
			k := int(g.Value())
			used[node] += k
			if _, ok := pod.Annotations[plugin.AnnotationDevices]; ok {
				devices[name] = devicesOf(t, pod)
				continue
			}
			r.modelled = true
			for range k {
				devices[name] = append(devices[name], next)
				next++
			}
		}
	}
	for node, u := range used {
		if c := topos[node].Len(); u < c {
			r.stranded += c - u
		}
	}
	type gangStat struct {
		racks   map[string]bool
		slowest float64
	}
	gangs := map[string]*gangStat{}
	r.slowest = math.Inf(1)
	for name, devs := range devices {
		pod := byName[name]
		group := *pod.Spec.SchedulingGroup.PodGroupName
		g := gangs[group]
		if g == nil {
			g = &gangStat{racks: map[string]bool{}, slowest: math.Inf(1)}
			gangs[group] = g
		}
		var i int
		_, err := fmt.Sscanf(pod.Spec.NodeName, "node-%d", &i)
		require.NoError(t, err)
		g.racks[fmt.Sprintf("rack-%d", i/s.rackSize)] = true
		topo := topos[pod.Spec.NodeName]
		for a := range devs {
			for b := a + 1; b < len(devs); b++ {
				bw := topo.Bandwidth(devs[a], devs[b])
				g.slowest, r.slowest = min(g.slowest, bw), min(r.slowest, bw)
			}
		}
	}
	for _, g := range gangs {
		if len(g.racks) > 1 {
			r.split++
		}
		r.mean += g.slowest / float64(len(gangs))
	}
}

// deleteUpstream deletes the workload's pods (names [0, pods) of its
// template) one by one and its pod groups, and waits until they are gone.
func deleteUpstream(t *testing.T, client kubernetes.Interface, ns, workload string, basicPods, groupPods, groups int) {
	t.Helper()
	ctx := context.Background()
	n := groupPods
	if workload == "basic" {
		n = basicPods
	}
	zero := int64(0)
	del := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range del {
				name := upstreamPod(workload, ns, "", i, 1).Name
				err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting pod %s: %v", name, err)
				}
			}
		})
	}
	for i := range n {
		del <- i
	}
	close(del)
	wg.Wait()
	for i := range groups {
		err := client.SchedulingV1beta1().PodGroups(ns).Delete(ctx, fmt.Sprintf("gang-%d", i), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod group %d: %v", i, err)
		}
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(l.Items) == 0, nil
	}))
	time.Sleep(time.Second) // let the scheduler's cache catch up
}

// upstreamHistograms are the scheduler histograms the upstream workloads
// report.
var upstreamHistograms = []string{
	"scheduler_plugin_execution_duration_seconds",
	"scheduler_scheduling_attempt_duration_seconds",
	"scheduler_podgroup_scheduling_attempt_duration_seconds",
}

// upstreamTable is docs/benchmarks.md's table: per workload, both
// profiles' pods per second over all rounds (all pods over all seconds),
// CPU per pod, the median of the rounds' ratios (gputopo / default), the
// pod-group attempt p99, GPUTopology's largest own p99, and for the
// topology-aware workload the placement quality; then every run.
func upstreamTable(runs []upstreamRun) string {
	var b strings.Builder
	b.WriteString("| workload | profile | rounds | pods | pods/s (all / all s) | CPU per pod | median round ratio | pod-group attempt p99 (worst round) | GPUTopology own p99 (worst EP, round) | GPUs stranded (mean) | slowest member link (worst / mean of gangs) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var workloads []string
	for _, r := range runs {
		if !slices.Contains(workloads, r.workload) {
			workloads = append(workloads, r.workload)
		}
	}
	for _, w := range workloads {
		for _, p := range []string{"gputopo", "default-scheduler"} {
			var bound, rounds, stranded int
			var elapsed, cpu time.Duration
			groupP99, own, worst, mean := math.NaN(), math.NaN(), math.Inf(1), 0.0
			var ratios []float64
			modelled := false
			for _, r := range runs {
				if r.workload != w || r.profile != p {
					continue
				}
				rounds++
				bound += r.bound
				elapsed += r.elapsed
				cpu += r.cpu
				stranded += r.stranded
				worst = min(worst, r.slowest)
				mean += r.mean
				modelled = modelled || r.modelled
				if len(r.groupAttempts) > 0 && (math.IsNaN(groupP99) || r.group[1] > groupP99) {
					groupP99 = r.group[1]
				}
				if o := r.ownMaxP99(); !math.IsNaN(o) && (math.IsNaN(own) || o > own) {
					own = o
				}
				for _, o := range runs {
					if o.workload == w && o.round == r.round && o.profile == "default-scheduler" && o.podsPerSecond() > 0 {
						ratios = append(ratios, r.podsPerSecond()/o.podsPerSecond())
					}
				}
			}
			if rounds == 0 {
				continue
			}
			slices.Sort(ratios)
			ratio := "-"
			if n := len(ratios); n > 0 && p == "gputopo" {
				m := ratios[n/2]
				if n%2 == 0 {
					m = (ratios[n/2-1] + ratios[n/2]) / 2
				}
				ratio = fmt.Sprintf("%.0f%%", m*100)
			}
			quality := "| - | -"
			if w == "tas" {
				note := ""
				if modelled {
					note = " (devices modelled)"
				}
				quality = fmt.Sprintf("| %.1f | %.0f / %.1f GB/s%s", float64(stranded)/float64(rounds), worst, mean/float64(rounds), note)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f | %.2f ms | %s | %s | %s %s |\n", w, p, rounds, bound,
				float64(bound)/elapsed.Seconds(), float64(cpu/time.Duration(max(bound, 1)))/1e6, ratio, ms(groupP99), ms(own), quality)
		}
	}
	b.WriteString("\nEvery run:\n\n")
	for _, r := range runs {
		b.WriteString("- " + r.String() + "\n")
	}
	return b.String()
}
