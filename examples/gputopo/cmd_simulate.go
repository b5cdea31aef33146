package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/scoring/simulate"
)

func init() {
	register(command{name: "simulate", summary: "replay a GPU cluster trace (the FGD paper's experiment) and compare placement policies", run: runSimulate})
}

// traceDir is where the Alibaba trace lives under the shared data.
const traceDir = "alibaba-gpu-v2023"

// paperAllocation is the FGD paper's mean allocation at 100% arrival on the
// default trace (seeds 42-51), for the summary's comparison column.
var paperAllocation = map[string]float64{
	"Random": 86.30, "DotProd": 90.62, "Clustering": 91.65, "Packing": 91.78, "BestFit": 92.86, "FGD": 95.23,
}

// Bounds of the simulate command's flags.
const (
	// maxSyntheticNodes bounds --synthetic (the trace has 1,213 nodes).
	maxSyntheticNodes = simulate.MaxSyntheticNodes
	// maxRuns bounds policies × seeds: each run keeps a step per pod.
	maxRuns = 1000
)

type simFlags struct {
	nodes, pods string
	cluster     string // --cluster: simulate_cluster.go
	synthetic   int
	policies    string
	seeds       string
	inflation   float64
	tie         string
	out         string
	workers     int
	quiet       bool
	asJSON      bool
	mix         string
	chartFrom   int
	topology    string
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", stderr)
	var f simFlags
	fs.StringVar(&f.nodes, "nodes", "", "node list `CSV` (openb_node_list_*.csv form); default: the trace's GPU nodes under ../shared/data")
	fs.StringVar(&f.cluster, "cluster", "", "replay on the nodes of a cluster `FILE` (gputopo capture's, or gang's) instead of a node list; pods from --pods, the trace or the synthetic workload")
	fs.StringVar(&f.pods, "pods", "", "pod list `CSV` (openb_pod_list_*.csv form, 11 or 5 columns); default: the trace's default list")
	fs.IntVar(&f.synthetic, "synthetic", 0, "replay the built-in synthetic workload of `N` nodes instead of files (used with 1200 nodes when no trace is found)")
	fs.StringVar(&f.policies, "policies", "all", "comma-separated `policies`: Random, DotProd, Clustering, Packing, BestFit, FGD, Lookahead, or all")
	fs.StringVar(&f.seeds, "seeds", "42-51", "`seeds`: a list (1,2,3) or a range (42-51)")
	fs.Float64Var(&f.inflation, "inflation", simulate.DefaultInflation, fmt.Sprintf("inflate the pods' GPU requests to `RATIO` of capacity with random clones, at most %d (<= 0: replay the list as is)", simulate.MaxInflation))
	fs.StringVar(&f.tie, "tie", "first", "break equal top scores by the `first` node in the seeded order (reproduces the paper) or at `random` (stock kube-scheduler)")
	fs.StringVar(&f.out, "out", "", "write per-run CSVs and the chart (PNG, SVG) to `DIR` (default: write nothing)")
	fs.BoolVar(&f.quiet, "q", false, "no progress on stderr")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary (per policy, at 100% and 110% arrival) as JSON; the other lines go to stderr")
	fs.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "replays to run at once (at least 1)")
	fs.StringVar(&f.mix, "mix", "", "with --synthetic: the pod `mix` as shares of the GPU pods, e.g. pinned=25%,shared=50%,multi=20% (pinned: accept one GPU model; shared: part of one GPU; multi: several whole GPUs), and cpu= the CPU-only share of all pods; default: the trace's shape")
	fs.StringVar(&f.topology, "topology", "", "replay on topology-rich nodes: `machines` from the catalogue (comma-separated names, or \"mix\" for "+strings.Join(topologyMix, ", ")+"), each node taking in turn one with its GPU count; reports the bandwidth multi-GPU pods got")
	fs.IntVar(&f.chartFrom, "chart-from", defaultChartFrom, "first arrived-workload `percent` the chart draws (0 for the whole replay)")
	maxWork := fs.Float64("max-work", defaultMaxSimWork, "refuse an experiment of more than `N` node scorings (GPU nodes x replayed pods x runs) before it starts")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	switch {
	case math.IsNaN(f.inflation) || math.IsInf(f.inflation, 0):
		return fmt.Errorf("--inflation %v: want a finite ratio of capacity (<= 0 replays the list as is)", f.inflation)
	case f.inflation > simulate.MaxInflation:
		return fmt.Errorf("--inflation %v: more than %d times the capacity", f.inflation, simulate.MaxInflation)
	case f.workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", f.workers)
	case f.chartFrom < 0 || f.chartFrom > 100:
		return fmt.Errorf("--chart-from %d: want a percentage from 0 to 100", f.chartFrom)
	}
	pols, err := parsePolicies(f.policies)
	if err != nil {
		return err
	}
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return err
	}
	if runs := len(pols) * len(seeds); runs > maxRuns {
		return fmt.Errorf("%d policies x %d seeds is %d runs, more than %d", len(pols), len(seeds), runs, maxRuns)
	}
	cfg := simulate.Config{Inflation: f.inflation}
	if f.inflation <= 0 {
		cfg.Inflation = simulate.NoInflation
	}
	switch f.tie {
	case "first":
		cfg.TieBreak = simulate.TieFirst
	case "random":
		cfg.TieBreak = simulate.TieRandom
	default:
		return fmt.Errorf("unknown --tie %q (want first or random)", f.tie)
	}

	info := stdout // the lines around the summary
	if f.asJSON {
		info = stderr
	}
	if err := checkSyntheticWork(f.synthetic, len(pols)*len(seeds), *maxWork); err != nil {
		return err
	}
	nodes, pods, origin, podList, paper, err := f.load(ctx, info)
	if err != nil {
		return err
	}
	if f.topology != "" {
		line, err := attachTopologies(nodes, f.topology)
		if err != nil {
			return err
		}
		fmt.Fprintln(info, line)
	}
	if err := checkSimWork(nodes, pods, cfg.Inflation, len(pols)*len(seeds), *maxWork); err != nil {
		return err
	}
	var gpus int
	var nodeMem, podMem int64
	gpuNodes := 0
	for _, n := range nodes {
		if n.GPUs > 0 {
			gpuNodes++
			gpus += n.GPUs
			nodeMem += n.MemoryBytes
		}
	}
	for _, p := range pods {
		podMem += p.MemoryBytes
	}
	fmt.Fprintf(info, "%s\n%d GPU nodes (%d GPUs, %s memory), %d pods (%s memory asked); %d policies x %d seeds; ties: %s\n",
		origin, gpuNodes, gpus, formatBytes(nodeMem), len(pods), formatBytes(podMem), len(pols), len(seeds), cfg.TieBreak)

	start := time.Now()
	res, err := simulate.ReplayAll(ctx, simulate.Experiment{Nodes: nodes, Pods: pods, Policies: pols, Seeds: seeds, Config: cfg},
		simulate.WithWorkers(f.workers), simulate.WithProgress(progress(stderr, f.quiet, len(pols)*len(seeds), start)))
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(info, "replayed %d runs in %.1fs on %d workers\n\n", len(res), elapsed.Seconds(), min(f.workers, len(res)))
	if f.asJSON {
		out := struct {
			At100     []simulate.Summary          `json:"at100"`
			At110     []simulate.Summary          `json:"at110"`
			Bandwidth []simulate.BandwidthSummary `json:"bandwidth_at100,omitempty"`
		}{simulate.Summarize(res, 100), simulate.Summarize(res, 110), nil}
		if f.topology != "" {
			out.Bandwidth = simulate.SummarizeBandwidth(res, 100)
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	} else {
		writeSummary(stdout, res, paper && f.inflation == simulate.DefaultInflation)
		if f.topology != "" {
			writeBandwidth(stdout, res)
		}
	}

	if f.out == "" {
		return nil
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	for _, r := range res {
		name := filepath.Join(f.out, fmt.Sprintf("%s-seed%d.csv", strings.ToLower(r.Policy), r.Seed))
		if err := writeFile(name, func(w io.Writer) error { return simulate.WriteCSV(w, r) }); err != nil {
			return err
		}
	}
	charts, err := writeCharts(f.out, "unallocated", chartSpec{podList: podList, from: f.chartFrom}, res)
	if err != nil {
		return err
	}
	fmt.Fprintf(info, "\nwrote %d run CSVs (arrival, allocation, fragmentation per %% of arrived workload) and %s to %s\n",
		len(res), strings.Join(charts, ", "), f.out)
	return nil
}

// load reads the node and pod lists: from flags, else the shared trace,
// else the synthetic workload. podList names the pods for the chart; paper
// reports whether they are the paper's default trace.
func (f *simFlags) load(ctx context.Context, stdout io.Writer) (nodes []simulate.Node, pods []simulate.Pod, origin, podList string, paper bool, err error) {
	if f.cluster != "" {
		nodes, pods, origin, podList, err = f.loadCluster(ctx)
		return nodes, pods, origin, podList, false, err
	}
	if f.synthetic < 0 || f.synthetic > maxSyntheticNodes {
		return nil, nil, "", "", false, fmt.Errorf("--synthetic %d: want a node count from 1 to %d", f.synthetic, maxSyntheticNodes)
	}
	if f.mix != "" && f.synthetic == 0 {
		return nil, nil, "", "", false, errors.New("--mix shapes the synthetic workload: use it with --synthetic N")
	}
	if f.synthetic > 0 {
		if f.nodes != "" || f.pods != "" {
			return nil, nil, "", "", false, errors.New("use --synthetic or --nodes/--pods, not both")
		}
		mix, err := parseSimMix(f.mix)
		if err != nil {
			return nil, nil, "", "", false, err
		}
		if nodes, pods, err = simulate.SyntheticMix(ctx, f.synthetic, 1, mix); err != nil {
			return nil, nil, "", "", false, err
		}
		name := fmt.Sprintf("synthetic, %d nodes, the trace's mix", f.synthetic)
		if f.mix != "" {
			name = fmt.Sprintf("synthetic, %d nodes, %v of the GPU pods", f.synthetic, mix)
		}
		return nodes, pods, fmt.Sprintf("built-in synthetic workload (%d nodes, mix %v; generated by simulate.SyntheticMix, not trace data)", f.synthetic, mix),
			name + " (generated, not trace data)", false, nil
	}
	nodeFile, podFile := f.nodes, f.pods
	if nodeFile == "" || podFile == "" {
		dir, ok := shareddata.Dir()
		traceNodes := filepath.Join(dir, "data", traceDir, "openb_node_list_gpu_node.csv")
		tracePods := filepath.Join(dir, "data", traceDir, "openb_pod_list_default.csv")
		if ok && exists(traceNodes) && exists(tracePods) {
			nodeFile = cmpOr(nodeFile, traceNodes)
			podFile = cmpOr(podFile, tracePods)
		} else if nodeFile == "" && podFile == "" {
			const n = 1200
			fmt.Fprintf(stdout, "no trace found (../shared/data/%s beside the checkout, or $GPUTOPO_SHARED);\nrunning on the built-in synthetic workload instead: it has the trace's shape but is generated by our code.\n", traceDir)
			if nodes, pods, err = simulate.Synthetic(ctx, n, 1); err != nil {
				return nil, nil, "", "", false, err
			}
			return nodes, pods, fmt.Sprintf("built-in synthetic workload (%d nodes; not trace data)", n),
				fmt.Sprintf("synthetic, %d nodes, the trace's mix (generated, not trace data; no trace found)", n), false, nil
		} else {
			return nil, nil, "", "", false, errors.New("give both --nodes and --pods (the trace was not found to fill in the other)")
		}
	}
	if nodes, err = readCSV(ctx, nodeFile, simulate.ReadNodes); err != nil {
		return nil, nil, "", "", false, err
	}
	if pods, err = readCSV(ctx, podFile, simulate.ReadPods); err != nil {
		return nil, nil, "", "", false, err
	}
	paper = filepath.Base(nodeFile) == "openb_node_list_gpu_node.csv" && filepath.Base(podFile) == "openb_pod_list_default.csv"
	podList = fmt.Sprintf("%s on %s", filepath.Base(podFile), filepath.Base(nodeFile))
	if paper {
		podList = "Alibaba openb trace, " + podList
	}
	return nodes, pods, fmt.Sprintf("nodes from %s\npods from %s", nodeFile, podFile), podList, paper, nil
}

// parseSimMix reads --mix: comma-separated pinned=, shared= and multi= shares
// of the GPU pods, each a fraction (0.25) or a percentage (25%); the ones
// left out keep the trace's value. Empty is simulate.DefaultMix.
func parseSimMix(s string) (simulate.Mix, error) {
	m := simulate.DefaultMix()
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return m, fmt.Errorf("--mix %q: want key=share, e.g. pinned=25%%", part)
		}
		val = strings.TrimSpace(val)
		scale := 1.0
		if v, pct := strings.CutSuffix(val, "%"); pct {
			val, scale = v, 0.01
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v*scale > 1 {
			return m, fmt.Errorf("--mix %s: %q is not a share from 0 to 1 (or 0%% to 100%%)", key, val)
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "pinned":
			m.Pinned = v * scale
		case "shared":
			m.Shared = v * scale
		case "multi":
			m.Multi = v * scale
		case "cpu":
			m.CPU = v * scale
		default:
			return m, fmt.Errorf("--mix: unknown key %q (want pinned, shared, multi or cpu)", key)
		}
	}
	if err := m.Validate(); err != nil {
		if !(m.CPU <= 0.9) {
			return m, fmt.Errorf("--mix %s: cpu is a share of all pods from 0 to 90%%", s)
		}
		return m, fmt.Errorf("--mix %s: shared + multi is more than 100%% of the GPU pods", s)
	}
	return m, nil
}

func readCSV[T any](ctx context.Context, name string, read func(context.Context, io.Reader) ([]T, error)) ([]T, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	out, err := read(ctx, file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func writeFile(name string, write func(io.Writer) error) error {
	file, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(file); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

func exists(name string) bool { _, err := os.Stat(name); return err == nil }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func parsePolicies(s string) ([]simulate.Policy, error) {
	if strings.TrimSpace(s) == "all" || strings.TrimSpace(s) == "" {
		return simulate.Policies(), nil
	}
	var out []simulate.Policy
	seen := map[string]bool{}
	for name := range strings.SplitSeq(s, ",") {
		p, err := simulate.PolicyByName(name)
		if err != nil { // say it without the sentinels' prefixes
			var known []string
			for _, k := range simulate.Policies() {
				known = append(known, k.Name())
			}
			return nil, fmt.Errorf("--policies: unknown policy %q (know %s)", strings.TrimSpace(name), strings.Join(known, ", "))
		}
		if !seen[p.Name()] {
			seen[p.Name()] = true
			out = append(out, p)
		}
	}
	return out, nil
}

func parseSeeds(s string) ([]int64, error) {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad --seeds %q: %q is not a number", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a || b-a >= 10000 {
				return nil, fmt.Errorf("bad --seeds range %q", part)
			}
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}

// writeSummary prints the one-screen summary at 100% and 110% arrival.
func writeSummary(w io.Writer, res []*simulate.Result, paper bool) {
	s100 := simulate.Summarize(res, 100)
	s110 := simulate.Summarize(res, 110)
	by110 := map[string]simulate.Summary{}
	for _, s := range s110 {
		by110[s.Policy] = s
	}
	fmt.Fprintln(w, "GPU allocation, % of capacity: mean over seeds [min-max]")
	header := fmt.Sprintf("%-11s %-22s %-22s %9s %11s", "policy", "at 100% arrival", "at 110% arrival", "unalloc.", "frag amount")
	if paper {
		header += "   paper@100"
	}
	fmt.Fprintln(w, header)
	cell := func(s simulate.Summary) string {
		return fmt.Sprintf("%6.2f [%.2f-%.2f]", s.Mean, s.Min, s.Max)
	}
	var fgd, best simulate.Summary
	for _, s := range s100 {
		line := fmt.Sprintf("%-11s %-22s ", s.Policy, cell(s))
		if t, ok := by110[s.Policy]; ok {
			line += fmt.Sprintf("%-22s ", cell(t))
		} else {
			line += fmt.Sprintf("%-22s ", "-")
		}
		line += fmt.Sprintf("%5.0f GPUs %10.1f%%", s.UnallocatedGPUs, s.FragAmount)
		if p, ok := paperAllocation[s.Policy]; ok && paper {
			line += fmt.Sprintf("   %6.2f", p)
		}
		fmt.Fprintln(w, line)
		if s.Policy == "FGD" {
			fgd = s
		}
		if s.Policy == "Lookahead" {
			best = s
		}
	}
	if len(s100) == 0 {
		fmt.Fprintln(w, "(no replay reached 100% arrival)")
	}
	if fgd.Seeds > 0 && best.Seeds > 0 {
		fmt.Fprint(w, "Lookahead vs FGD: ", compareLine(best, fgd, "100%"))
		if t, ok := by110["Lookahead"]; ok {
			if u, ok := by110["FGD"]; ok {
				fmt.Fprint(w, "; ", compareLine(t, u, "110%"))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "(at 100% arrival: unalloc. = GPUs left unallocated; frag amount = GPU that typical pods cannot use, % of capacity)")
}

// compareLine says how our policy (ours) stands against another at one
// arrival level, in words that stay right whichever is ahead: "Lookahead
// leads FGD by 0.55 points at 100% (34 fewer unallocated GPUs, 12% fewer)",
// "Lookahead trails FGD by 0.40 points at 100% (12 more unallocated GPUs)",
// "Lookahead ties with FGD at 100%". Points are of mean allocation, shown
// to two decimals; a difference that rounds to 0.00 is a tie.
func compareLine(ours, other simulate.Summary, at string) string {
	d := ours.Mean - other.Mean
	gpus := other.UnallocatedGPUs - ours.UnallocatedGPUs
	switch {
	case math.Round(d*100) == 0:
		return fmt.Sprintf("%s ties with %s at %s", ours.Policy, other.Policy, at)
	case d > 0:
		line := fmt.Sprintf("%s leads %s by %.2f points at %s", ours.Policy, other.Policy, d, at)
		if gpus > 0 && other.UnallocatedGPUs > 0 {
			line += fmt.Sprintf(" (%.0f fewer unallocated GPUs, %.0f%% fewer)", gpus, 100*gpus/other.UnallocatedGPUs)
		}
		return line
	}
	line := fmt.Sprintf("%s trails %s by %.2f points at %s", ours.Policy, other.Policy, -d, at)
	if gpus < 0 {
		line += fmt.Sprintf(" (%.0f more unallocated GPUs)", -gpus)
	}
	return line
}

// formatBytes prints a byte count in the largest binary unit that keeps it
// at least 1, with one decimal: "1.5 TiB", "512.0 MiB", "100 B".
func formatBytes(b int64) string {
	const units = "KMGTPE"
	if b < 1024 {
		return strconv.FormatInt(b, 10) + " B"
	}
	v, u := float64(b)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[u:u+1] + "iB"
}

// progress returns a WithProgress hook that prints a line on stderr as each
// replay (policy, seed) finishes, with the count and elapsed time; nothing
// with quiet.
func progress(stderr io.Writer, quiet bool, runs int, start time.Time) func(simulate.Progress) {
	if quiet {
		return nil
	}
	var mu sync.Mutex
	done := 0
	return func(p simulate.Progress) {
		if p.Done != p.Total {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Fprintf(stderr, "[%d/%d] %s seed %d done (%.1fs)\n", done, runs, p.Policy, p.Seed, time.Since(start).Seconds())
	}
}
