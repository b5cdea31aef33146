package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/gangfile"
	"github.com/gputopo/gputopo/gang/queue"
	"github.com/gputopo/gputopo/provider/catalog"
)

func init() {
	register(command{name: "gang", summary: "check a gang job (or a queue of jobs) against a cluster: placement, or why not", run: runGang})
}

const gangUsage = `usage: gputopo gang --cluster FILE --job FILE [flags]

Checks a job file against a cluster file, all or nothing: prints where every
pod goes (node, devices or MIG slots), or the verdict — fits after release,
blocked (how much is missing, where, held by whom), fragmented, never fits —
with reasons. A job file with several jobs (or --queue) runs one queue pass:
order, GPUs ahead, what starts now, the head-of-line reservation.

A job with groups (a hierarchical job) is checked as a tree: verdict and
domain per group; --preempt then plans a domain-clearing preemption (the
cheapest domain of its level to clear, whole lower-priority victims). A file
with fairShare runs a hierarchical fair-share pass (deserved quotas, limits,
reclaim, one reservation per queue); jobs with a wait policy are planned at
the tightest level they accept now (wait for a better placement).

File formats: go doc github.com/gputopo/gputopo/gang/gangfile Jobs (and Cluster).
Machines named in a cluster file are the embedded ones (gputopo machines).

flags:
`

func runGang(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gang", stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), gangUsage)
		printDefaults(fs)
		fmt.Fprintln(fs.Output(), "\n"+exitCodesHelp)
	}
	jobFile := fs.String("job", "", "job file `FILE` (YAML or JSON): one job, or jobs and queues")
	fs.StringVar(jobFile, "jobs", "", "same as --job")
	clusterFile := fs.String("cluster", "", "cluster file `FILE` (YAML or JSON): nodes, labels, topologies, running pods")
	strategy := fs.String("strategy", "bestfit", "how a gang spreads inside its domain: `bestfit`, balanced or leastfreecapacity")
	queueFlag := fs.Bool("queue", false, "run a queue pass even for a single job")
	preempt := fs.Bool("preempt", false, "when the job does not fit, find the fewest lower-priority jobs to evict (a hierarchical job: the cheapest domain to clear)")
	noResv := fs.Bool("no-reservation", false, "queue pass without head-of-line reservation")
	summary := fs.Bool("summary", false, "print the verdict and counts, not every pod")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 0, "budget `DURATION` of a queue, fair-share or preemption pass (0: none): past it the jobs not yet planned wait and the plan is marked partial (a preemption keeps the cheapest found); a single check fails")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout < 0 {
		return fmt.Errorf("--timeout %v: want a duration of 0 (none) or more", *timeout)
	}
	if *jobFile == "" || *clusterFile == "" {
		fmt.Fprintln(stderr, "gputopo gang: --job and --cluster are required")
		fs.Usage()
		return errUsage
	}
	strat, err := gang.ParseStrategy(*strategy)
	if err != nil {
		return fmt.Errorf("--strategy: %w", err)
	}
	snap, err := gangReadCluster(ctx, *clusterFile)
	if err != nil {
		return err
	}
	data, err := gangRead(*jobFile)
	if err != nil {
		return err
	}
	jf, err := gangfile.ParseJobFile(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *jobFile, err)
	}
	jobs, queues := jf.Jobs, jf.Queues
	if *timeout > 0 { // the budget of the pass, not of reading the files
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	for _, w := range snap.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if done, err := gangFileModes(ctx, stdout, snap, jf, strat, *preempt, *summary, *asJSON); done {
		return err
	}
	if len(jobs) > 1 || *queueFlag {
		opts := []queue.Option{queue.WithStrategy(strat), queue.WithQueues(queues...)}
		if *noResv {
			opts = append(opts, queue.WithoutReservation())
		}
		plan, err := queue.PlanQueue(ctx, snap, jobs, opts...)
		if err != nil {
			return err
		}
		if *asJSON {
			err = gangJSON(stdout, plan)
		} else {
			err = renderQueue(stdout, plan, *summary)
		}
		if err != nil {
			return err
		}
		for _, e := range plan.Entries {
			if !e.Action.CanStart() {
				return errNoFit
			}
		}
		return nil
	}
	j := &jobs[0]
	res, err := gang.Check(ctx, snap, j, gang.WithStrategy(strat))
	if err != nil {
		return err
	}
	var pre *gang.Preemption
	var preErr error
	if *preempt && res.Verdict != gang.Fits {
		pre, preErr = gang.Preempt(ctx, snap, j, gang.WithStrategy(strat))
		if preErr != nil && !errors.Is(preErr, gang.ErrNoVictims) {
			return preErr
		}
	}
	if *asJSON {
		out := struct {
			*gang.Result
			Preemption   *gang.Preemption `json:"preemption,omitempty"`
			NoPreemption string           `json:"noPreemption,omitempty"`
		}{Result: res, Preemption: pre}
		if preErr != nil {
			out.NoPreemption = preErr.Error()
		}
		if err := gangJSON(stdout, out); err != nil {
			return err
		}
	} else {
		renderResult(stdout, j, res, *summary)
		if *preempt && res.Verdict != gang.Fits {
			renderPreemption(stdout, pre, preErr, *summary)
		}
	}
	if res.Verdict != gang.Fits {
		return errNoFit
	}
	return nil
}

func gangRead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, inputError("file", path, err)
	}
	defer f.Close()
	b, err := gangfile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

func gangReadCluster(ctx context.Context, path string) (*gang.Snapshot, error) {
	data, err := gangRead(path)
	if err != nil {
		return nil, err
	}
	s, err := gangfile.ParseCluster(ctx, data, catalog.Get)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func gangJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func gangWhere(level, domain string) string {
	switch {
	case domain == "":
		return "the whole cluster"
	case level == gang.LevelNode:
		return "node " + domain
	}
	return fmt.Sprintf("%s %q", level, domain)
}

func renderResult(w io.Writer, j *gang.Job, r *gang.Result, summary bool) {
	proof := ""
	if r.Verdict != gang.Fits && r.Verdict != gang.FitsAfterRelease && !r.Proven {
		proof = " (not proven: a search bound was hit)"
	}
	fmt.Fprintf(w, "job %s: %s%s\n", r.Job, r.Verdict, proof)
	fmt.Fprintf(w, "  asks for %d pods, %d GPUs", r.Demand.Pods, r.Demand.GPUs)
	if r.Demand.MIGSlices > 0 {
		fmt.Fprintf(w, ", ~%d MIG slices", r.Demand.MIGSlices)
	}
	if r.Demand.Shares > 0 {
		fmt.Fprintf(w, ", %d shares (%s of GPU memory)", r.Demand.Shares, gangBytes(r.Demand.SharedMemoryBytes))
	}
	fmt.Fprintf(w, " (gang threshold)\n")
	if p := r.Placement; p != nil {
		fmt.Fprintf(w, "  placed in %s: %d new pods on %d nodes, %d GPUs", gangWhere(p.Level, p.Domain), len(p.Pods), len(p.Nodes()), p.GPUs())
		if n := p.Shares(); n > 0 {
			fmt.Fprintf(w, ", %d shares", n)
		}
		if p.Members > 0 {
			fmt.Fprintf(w, " (+%d members already placed)", p.Members)
		}
		fmt.Fprintln(w)
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if len(p.WaitsFor) > 0 {
			fmt.Fprintf(w, "  waits for terminating pods: %s\n", strings.Join(p.WaitsFor, ", "))
		}
		if !summary {
			renderPods(w, p)
		}
	}
	for _, reason := range r.Reasons {
		fmt.Fprintf(w, "  - %s\n", reason)
	}
	if len(r.Domains) > 0 && !summary {
		fmt.Fprintln(w, "  closest domains:")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    DOMAIN\tLEVEL\tPODS\tNEEDED\tFREE GPUS\tRELEASING\tHELD\tHOLDERS")
		for _, d := range r.Domains {
			var hs []string
			for _, h := range d.Holders {
				hs = append(hs, fmt.Sprintf("%s(p%d, %d GPUs)", h.Job, h.Priority, h.GPUs))
			}
			fmt.Fprintf(tw, "    %s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", d.Domain, d.Level, d.Pods, d.Needed, d.FreeGPUs, d.ReleasingGPUs, d.HeldGPUs, strings.Join(hs, " "))
		}
		tw.Flush()
	}
	if r.Verdict != gang.Fits && r.Verdict != gang.NeverFits {
		fmt.Fprintf(w, "  free now: %d GPUs", r.Free.GPUs)
		if r.Releasing.GPUs > 0 {
			fmt.Fprintf(w, ", %d being released", r.Releasing.GPUs)
		}
		if r.Demand.Shares > 0 {
			fmt.Fprintf(w, "; %s of GPU memory for shares", gangBytes(r.Free.SharedMemoryBytes))
		}
		fmt.Fprintln(w)
	}
}

func renderPods(w io.Writer, p *gang.Placement) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tNODE\tDEVICES\tSUBGROUP")
	for _, pp := range p.Pods {
		dev := gangDevices(pp.Devices)
		if sh := pp.Shared; sh != nil {
			// no spaces: one column
			dev += "(shared:" + gangBytes(int64(sh.MemoryBytes))
			if sh.ComputeMilli > 0 {
				dev += fmt.Sprintf(",%dm", sh.ComputeMilli)
			}
			dev += ")"
		}
		if len(pp.MIG) > 0 {
			var ms []string
			for _, m := range pp.MIG {
				ms = append(ms, m.String())
			}
			dev = strings.Join(ms, " ")
		}
		if dev == "" {
			dev = "-"
		}
		subGroup := "-"
		if pp.SubGroup >= 0 {
			subGroup = strconv.Itoa(pp.SubGroup)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", pp.Name, pp.Node, dev, subGroup)
	}
	tw.Flush()
}

// gangBytes formats a memory size in GiB or MiB ("20GiB", "512MiB").
func gangBytes(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", b>>30)
	}
	if b >= 1<<30 {
		return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%dMiB", b>>20)
}

// gangDevices formats device indices with ranges ("0-3,6").
func gangDevices(d []int) string {
	var parts []string
	for i := 0; i < len(d); {
		j := i
		for j+1 < len(d) && d[j+1] == d[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", d[i], d[j]))
		} else {
			parts = append(parts, strconv.Itoa(d[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func renderPreemption(w io.Writer, p *gang.Preemption, err error, summary bool) {
	if err != nil {
		fmt.Fprintf(w, "preemption: none possible: %v\n", err)
		return
	}
	if len(p.Victims) == 0 {
		fmt.Fprintln(w, "preemption: not needed")
		return
	}
	exact := "fewest possible"
	if !p.Exact {
		exact = "best found within the search budget"
	}
	fmt.Fprintf(w, "preemption: evict %d whole jobs in %s (%s; %d sets tried)\n", len(p.Victims), gangWhere(p.Level, p.Domain), exact, p.Considered)
	fmt.Fprintf(w, "  cost: %v\n", p.Cost)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VICTIM\tPRIORITY\tPODS\tGPUS\tNODES")
	for _, v := range p.Victims {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\n", v.Job, v.Priority, v.Pods, v.GPUs, strings.Join(v.Nodes, ","))
	}
	tw.Flush()
	if p.Placement != nil {
		fmt.Fprintf(w, "  then: %d pods on %d nodes in %s\n", len(p.Placement.Pods), len(p.Placement.Nodes()), gangWhere(p.Placement.Level, p.Placement.Domain))
		if !summary {
			renderPods(w, p.Placement)
		}
	}
}

// printPartial says when a pass ran out of budget.
func printPartial(w io.Writer, partial bool) {
	if partial {
		fmt.Fprintln(w, "partial: the pass's budget (--timeout) ran out; the jobs \"not planned\" wait without having been looked at")
	}
}

func renderQueue(w io.Writer, plan *queue.QueuePlan, summary bool) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POS\tQUEUE\tJOB\tPRIO\tGPUS\tGPUS AHEAD\tACTION\tVERDICT\tREASON")
	counts := map[queue.Action]int{}
	for _, e := range plan.Entries {
		counts[e.Action]++
		if summary && e.Action == queue.Wait {
			continue
		}
		q := e.Queue
		if q == "" {
			q = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", e.Position, q, e.Job, e.Priority, e.GPUs, e.GPUsAhead, e.Action, e.Verdict, e.Reason)
	}
	tw.Flush()
	var parts []string
	for a := queue.Start; a <= queue.Never; a++ {
		if counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		}
	}
	fmt.Fprintf(w, "\n%d jobs: %s\n", len(plan.Entries), strings.Join(parts, ", "))
	printPartial(w, plan.Partial)
	if r := plan.Reservation; r != nil {
		when := "when they end (run times unknown)"
		if r.StartKnown {
			when = fmt.Sprintf("in %v", r.Start)
		}
		fmt.Fprintf(w, "reservation: %s starts %s on %d nodes in %s, after %s\n", r.Job, when, len(r.Placement.Nodes()),
			gangWhere(r.Placement.Level, r.Placement.Domain), strings.Join(r.WaitsFor, ", "))
	}
	return nil
}
