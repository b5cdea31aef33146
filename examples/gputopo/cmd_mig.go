package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/amdpart"
	"github.com/gputopo/gputopo/mig/migfile"
	"github.com/gputopo/gputopo/mig/parted"
)

func init() {
	register(command{name: "mig", summary: "MIG and AMD partitions: profiles, layouts, fragmentation, placement and defragmentation plans", run: runMig})
}

const migUsage = `usage: gputopo mig <action> [flags]

actions:
  models                      list the GPU models with partition tables
  profiles --model M          a model's MIG profiles and placements (or an AMD model's modes)
  show     --layout F         each GPU's instances, free placements and fragmentation
  place    --layout F --profile P[,P...]
                              choose GPU and slot for one request or a batch
  defrag   --layout F --profile P --priority N
                              the cheapest reconfiguration that makes room (MIG),
           --layout F --compute CPX [--memory NPS4]
                              or the cheapest mode change (AMD)
  template --layout F --mix P=N[,P=N...] [--templates F | --mig-parted F] [--priority N]
           [--write-mig-parted F]
                              the partition template serving the most demand, and
                              the transition to it (same policy flags as defrag);
                              candidates from a mig-parted configuration, the
                              choice written as one with its nvidia.com/mig.config label

Layout files are JSON (schema gputopo-mig/v1; see package mig/migfile's File).
Instead of --layout, --amd-root DIR (a sysfs root; / for this machine) or
--kfd DIR (a raw KFD capture) plans against the discovered AMD GPUs.
Every action takes --json.`

func runMig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, migUsage)
		if len(args) == 0 {
			return errUsage
		}
		return flag.ErrHelp
	}
	action, args := args[0], args[1:]
	switch action {
	case "models":
		return migModels(args, stdout, stderr)
	case "profiles":
		return migProfiles(args, stdout, stderr)
	case "show":
		return migShow(args, stdout, stderr)
	case "place":
		return migPlace(ctx, args, stdout, stderr)
	case "defrag":
		return migDefrag(ctx, args, stdout, stderr)
	case "template":
		return migTemplate(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "gputopo mig: unknown action %q\n\n%s\n", action, migUsage)
	return errUsage
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func migModels(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig models", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	type row struct {
		Name    string   `json:"name"`
		Vendor  string   `json:"vendor"`
		Slots   int      `json:"slots,omitempty"`
		Aliases []string `json:"aliases,omitempty"`
	}
	var rows []row
	for _, m := range mig.DefaultCatalog().Models() {
		rows = append(rows, row{m.Name(), "nvidia", m.Slots(), m.Aliases()})
	}
	for _, m := range amdpart.Models() {
		rows = append(rows, row{Name: m.Name(), Vendor: "amd", Aliases: m.Spec().Aliases})
	}
	if *asJSON {
		return writeJSON(stdout, rows)
	}
	for _, r := range rows {
		kind := fmt.Sprintf("MIG, %d memory slices", r.Slots)
		if r.Vendor == "amd" {
			kind = "AMD compute/memory modes"
		}
		fmt.Fprintf(stdout, "%-12s %-26s aka %s\n", r.Name, kind, strings.Join(r.Aliases, ", "))
	}
	return nil
}

func migProfiles(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig profiles", stderr)
	name := fs.String("model", "", "GPU `model` (A100-80GB, \"NVIDIA H100 80GB HBM3\", MI300X, ...)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		fmt.Fprintln(stderr, "gputopo mig profiles: --model is required (see `gputopo mig models`)")
		return errUsage
	}
	m, err := mig.DefaultCatalog().Lookup(*name)
	if err != nil {
		a, aerr := amdpart.Lookup(*name)
		if aerr != nil {
			return err
		}
		return amdProfiles(a, *asJSON, stdout)
	}
	if *asJSON {
		return writeJSON(stdout, m.Spec())
	}
	fmt.Fprintf(stdout, "%s: %d memory slices (table: %s)\n\n", m.Name(), m.Slots(), m.Source())
	fmt.Fprintf(stdout, "%-12s %3s %3s %3s %4s %8s %4s  %s\n", "PROFILE", "ID", "CS", "MS", "SMs", "MiB", "MAX", "PLACEMENTS")
	for _, p := range m.Profiles() {
		var starts []string
		for _, pl := range p.Placements {
			starts = append(starts, strconv.Itoa(pl.Start))
		}
		mib := "?"
		if p.MemoryMiB > 0 {
			mib = strconv.FormatUint(p.MemoryMiB, 10)
		}
		fmt.Fprintf(stdout, "%-12s %3d %3d %3d %4d %8s %4d  {%s}:%d\n", p.Name, p.ID, p.ComputeSlices, p.MemorySlices, p.Multiprocessors, mib, p.MaxInstances, strings.Join(starts, ","), p.MemorySlices)
	}
	return nil
}

func amdProfiles(m *amdpart.Model, asJSON bool, stdout io.Writer) error {
	type mode struct {
		Mode        string `json:"mode"`
		Partitions  int    `json:"partitions"`
		MemoryGB    int    `json:"memoryGBPerPartition"`
		CUs         int    `json:"cusPerPartition"`
		ComputeMode string `json:"compute"`
		MemoryMode  string `json:"memory"`
	}
	var modes []mode
	for _, c := range m.Combinations() {
		modes = append(modes, mode{c.String(), m.Partitions(c.Compute), m.PartitionMemoryGB(c.Compute), m.PartitionCUs(c.Compute), string(c.Compute), string(c.Memory)})
	}
	if asJSON {
		return writeJSON(stdout, struct {
			Model string `json:"model"`
			Modes []mode `json:"modes"`
		}{m.Name(), modes})
	}
	fmt.Fprintf(stdout, "%s: %d XCCs; a mode applies to the whole GPU (memory modes to the whole hive, after a driver reload)\n\n", m.Name(), m.Spec().XCCs)
	fmt.Fprintf(stdout, "%-10s %10s %12s %8s\n", "MODE", "PARTITIONS", "GB/PARTITION", "CUs")
	for _, md := range modes {
		fmt.Fprintf(stdout, "%-10s %10d %12d %8d\n", md.Mode, md.Partitions, md.MemoryGB, md.CUs)
	}
	return nil
}

// layoutFlags are the flags every layout-reading action shares.
type layoutFlags struct {
	path   string
	asJSON bool
	amd    amdSource // --amd-root / --kfd: a discovered machine (cmd_mig_amd.go)
}

func (f *layoutFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "layout", "", "layout `file` (JSON, schema gputopo-mig/v1)")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	f.amd.register(fs)
}

func (f *layoutFlags) load(stderr io.Writer, action string) (*migfile.File, error) {
	if f.amd.given() {
		return f.amd.load(context.Background(), stderr, action, f.path)
	}
	if f.path == "" {
		fmt.Fprintf(stderr, "gputopo mig %s: --layout is required (or --amd-root/--kfd for a discovered AMD machine)\n", action)
		return nil, errUsage
	}
	r, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	file, err := migfile.Read(r, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return file, nil
}

// parseMix parses "3g.40gb=2,1g.10gb=5".
func parseMix(s string) (mig.Mix, error) {
	if s == "" {
		return nil, nil
	}
	mix := mig.Mix{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(part, "=")
		v := 1.0
		if ok {
			var err error
			if v, err = strconv.ParseFloat(w, 64); err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("--mix: bad weight in %q (want a finite number ≥ 0)", part)
			}
		}
		if _, err := mig.ParseProfileName(name); err != nil {
			return nil, fmt.Errorf("--mix: %w", err)
		}
		mix[strings.TrimSpace(name)] += v
	}
	if err := mix.Validate(); err != nil {
		return nil, fmt.Errorf("--mix: %w", err)
	}
	return mix, nil
}

func migShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig show", stderr)
	var lf layoutFlags
	lf.register(fs)
	mixFlag := fs.String("mix", "", "demand `mix` for fragmentation, e.g. 3g.40gb=2,1g.10gb=5 (default: every profile equally)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	mix, err := parseMix(*mixFlag)
	if err != nil {
		return err
	}
	file, err := lf.load(stderr, "show")
	if err != nil {
		return err
	}
	if err := checkFleetProfiles(file.Layouts, mixProfiles(mix)...); err != nil {
		return err
	}
	type gpuOut struct {
		GPU           string                     `json:"gpu"`
		Model         string                     `json:"model"`
		Slots         string                     `json:"slots"`
		Instances     []mig.Instance             `json:"instances"`
		Free          map[string][]mig.Placement `json:"freePlacements"`
		Fragmentation mig.Fragmentation          `json:"fragmentation"`
		layout        *mig.Layout
	}
	var gpus []gpuOut
	for _, l := range file.Layouts {
		g := gpuOut{GPU: l.GPU, Model: l.Model.Name(), Slots: l.SlotMap(), Instances: l.Instances, Free: map[string][]mig.Placement{}, layout: l}
		for _, p := range l.Model.Profiles() {
			fp, _ := l.FreePlacements(p.Name.String())
			g.Free[p.Name.String()] = fp
		}
		if g.Fragmentation, err = l.Fragmentation(mix); err != nil {
			return err
		}
		gpus = append(gpus, g)
	}
	node, err := mig.NodeFragmentation(file.Layouts, mix)
	if err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(stdout, struct {
			GPUs          []gpuOut          `json:"gpus"`
			Fragmentation mig.Fragmentation `json:"fragmentation"`
			AMD           []*amdpart.GPU    `json:"amd,omitempty"`
		}{gpus, node, file.AMD})
	}
	for _, g := range gpus {
		fmt.Fprintf(stdout, "%s  %s  [%s]  free %d/%d slots, unusable %.1f (fragmentation %.2f)\n",
			g.GPU, g.Model, g.Slots, g.Fragmentation.FreeSlots, g.Fragmentation.Slots, g.Fragmentation.UnusableSlots, g.Fragmentation.Score)
		for _, in := range g.Instances {
			fmt.Fprintf(stdout, "    %s\n", in)
		}
		var parts, none []string
		for _, p := range g.layout.Model.Profiles() {
			fp := g.Free[p.Name.String()]
			if len(fp) == 0 {
				none = append(none, p.Name.String())
				continue
			}
			var starts []string
			for _, pl := range fp {
				starts = append(starts, strconv.Itoa(pl.Start))
			}
			parts = append(parts, fmt.Sprintf("%s@{%s}", p.Name, strings.Join(starts, ",")))
		}
		fmt.Fprintf(stdout, "    fits: %s\n", orNone(strings.Join(parts, " ")))
		if len(none) > 0 {
			fmt.Fprintf(stdout, "    does not fit: %s\n", strings.Join(none, " "))
		}
	}
	if len(gpus) > 0 {
		fmt.Fprintf(stdout, "node: %d of %d slots free, %.1f unusable for the mix (fragmentation %.2f)\n", node.FreeSlots, node.Slots, node.UnusableSlots, node.Score)
	}
	for _, a := range file.AMD {
		hive := a.Hive
		if hive == "" {
			hive = "-"
		}
		fmt.Fprintf(stdout, "%s  %s  hive %s  %s/%s  %d partitions, free %v\n", a.GPU, a.Model.Name(), hive, a.Compute, a.Memory, a.Model.Partitions(a.Compute), a.FreePartitions())
		for _, w := range a.Work {
			fmt.Fprintf(stdout, "    partition %d: %s p%d\n", w.Partition, w.Owner, w.Priority)
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

func migPlace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig place", stderr)
	var lf layoutFlags
	lf.register(fs)
	profiles := fs.String("profile", "", "profile(s) to place, comma-separated for a batch (3g.40gb,1g.10gb)")
	owner := fs.String("owner", "", "owner name for the request(s)")
	prio := fs.Int("priority", 0, "priority of the request(s)")
	strategy := fs.String("strategy", "keep-large-open", "`strategy`: keep-large-open, first-fit or most-used-first")
	mixFlag := fs.String("mix", "", "demand `mix` keep-large-open preserves (default: every profile equally)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *profiles == "" {
		fmt.Fprintln(stderr, "gputopo mig place: --profile is required")
		return errUsage
	}
	var s mig.Strategy
	if err := s.UnmarshalText([]byte(*strategy)); err != nil {
		return err
	}
	mix, err := parseMix(*mixFlag)
	if err != nil {
		return err
	}
	file, err := lf.load(stderr, "place")
	if err != nil {
		return err
	}
	if err := checkFleetProfiles(file.Layouts, append(mixProfiles(mix), strings.Split(*profiles, ",")...)...); err != nil {
		return err
	}
	var reqs []mig.Request
	for i, p := range strings.Split(*profiles, ",") {
		o := *owner
		if o != "" && strings.Contains(*profiles, ",") {
			o = fmt.Sprintf("%s-%d", o, i)
		}
		name, err := mig.ParseProfileName(p)
		if err != nil {
			return err
		}
		reqs = append(reqs, mig.Request{Profile: name, Owner: o, Priority: *prio})
	}
	f, err := mig.NewFleet(ctx, file.Layouts, mig.PlaceOptions{Strategy: s, Mix: mix})
	if err != nil {
		return err
	}
	out, batchErr := f.PlaceBatch(ctx, reqs)
	for _, a := range out {
		if !a.OK() && !errors.Is(batchErr, mig.ErrNoFit) {
			return batchErr
		}
	}
	if lf.asJSON {
		return writeJSON(stdout, struct {
			Assignments []mig.Assignment `json:"assignments"`
			Layouts     json.RawMessage  `json:"layouts"`
		}{out, mustMarshalFile(f.Layouts())})
	}
	for _, a := range out {
		if a.OK() {
			fmt.Fprintf(stdout, "%s -> %s %v (create the GPU instance at this placement explicitly; capacity lost %.1f)\n", a.Request.Profile, a.GPU, a.Placement, a.Loss)
		} else {
			fmt.Fprintf(stdout, "%s -> no free placement on any GPU (try `gputopo mig defrag`)\n", a.Request.Profile)
		}
	}
	if batchErr != nil {
		return noFitError{"some requests did not fit"}
	}
	return nil
}

func mustMarshalFile(ls []*mig.Layout) json.RawMessage {
	b, err := migfile.Marshal(ls, nil)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// registerPolicy adds the flags of a mig.Policy to fs.
func registerPolicy(fs *flag.FlagSet, pol *mig.Policy) {
	fs.IntVar(&pol.Threshold, "threshold", 0, "disruption threshold: a job below it disturbs no in-use work (no move, no eviction); only work below it is evicted")
	fs.BoolVar(&pol.AllowMovesBelowThreshold, "allow-moves-below-threshold", false, "let a job below --threshold move (never evict) in-use work")
	fs.IntVar(&pol.MaxDisruptions, "budget", 0, "most in-use instances to move or evict (0: no limit, -1: none)")
	fs.BoolVar(&pol.MoveAnyPriority, "move-any", false, "allow moving work of any priority (default: only lower than the pending job)")
	fs.BoolVar(&pol.NoMoves, "no-moves", false, "never move work")
	fs.BoolVar(&pol.NoEvictions, "no-evictions", false, "never evict work")
	fs.BoolVar(&pol.SameGPUMovesOnly, "same-gpu", false, "move instances only within their GPU")
	fs.BoolVar(&pol.KeepIdle, "keep-idle", false, "never destroy idle instances")
}

func migDefrag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig defrag", stderr)
	var lf layoutFlags
	lf.register(fs)
	profile := fs.String("profile", "", "MIG profile of the pending request (7g.80gb)")
	compute := fs.String("compute", "", "AMD compute mode of the pending request (CPX)")
	memory := fs.String("memory", "", "AMD memory mode of the pending request (NPS4; default any)")
	owner := fs.String("owner", "pending", "owner of the pending request")
	prio := fs.Int("priority", 0, "priority of the pending request")
	var pol mig.Policy
	registerPolicy(fs, &pol)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*profile == "") == (*compute == "") {
		fmt.Fprintln(stderr, "gputopo mig defrag: give either --profile (MIG) or --compute (AMD)")
		return errUsage
	}
	file, err := lf.load(stderr, "defrag")
	if err != nil {
		return err
	}
	var plan *mig.Plan
	if *profile != "" {
		name, perr := mig.ParseProfileName(*profile)
		if perr != nil {
			return perr
		}
		if err := checkFleetProfiles(file.Layouts, *profile); err != nil {
			return err
		}
		plan, err = mig.PlanDefrag(ctx, file.Layouts, mig.Request{Profile: name, Owner: *owner, Priority: *prio}, pol)
	} else {
		req := amdpart.Request{Owner: *owner, Priority: *prio}
		if req.Compute, err = amdpart.ParseComputeMode(*compute); err != nil {
			return err
		}
		if *memory != "" {
			if req.Memory, err = amdpart.ParseMemoryMode(*memory); err != nil {
				return err
			}
		}
		plan, err = amdpart.Plan(ctx, file.AMD, req, pol)
	}
	var npe *mig.NoPlanError
	if errors.As(err, &npe) {
		return printNoPlan(stdout, npe, lf.asJSON, nil)
	}
	if err != nil {
		return err
	}
	if lf.asJSON {
		return writeJSON(stdout, struct {
			Plan        *mig.Plan `json:"plan"`
			Explanation string    `json:"explanation"`
		}{plan, plan.Explain()})
	}
	printPlan(stdout, plan)
	return nil
}

// printPlan prints a plan's explanation and numbered steps.
func printPlan(stdout io.Writer, plan *mig.Plan) {
	fmt.Fprint(stdout, plan.Explain())
	if len(plan.Steps) > 0 {
		fmt.Fprintln(stdout, "\nSteps:")
		for i, s := range plan.Steps {
			fmt.Fprintf(stdout, "%3d. %s\n", i+1, s)
		}
	}
}

// printNoPlan prints why there is no plan (as text, or as JSON, with the
// template scores when there are any) and returns the command's error. The
// error is bounded (counts per cause, a few examples each), so the output
// is too, however large the fleet.
func printNoPlan(stdout io.Writer, npe *mig.NoPlanError, asJSON bool, scores []mig.TemplateScore) error {
	if asJSON {
		if werr := writeJSON(stdout, struct {
			Plan     *mig.Plan           `json:"plan"`
			Rejected int                 `json:"rejected"`
			Causes   []mig.CauseCount    `json:"causes"`
			Reasons  []string            `json:"reasons"`
			Scores   []mig.TemplateScore `json:"scores,omitempty"`
		}{nil, npe.Rejected(), npe.Causes, npe.Reasons, scores}); werr != nil {
			return werr
		}
	} else {
		fmt.Fprintf(stdout, "No plan for %s: %d way(s) of making room rejected.\n", npe.Request, npe.Rejected())
		for _, c := range npe.Causes {
			fmt.Fprintf(stdout, "  %6d  %s\n", c.Count, c.Cause)
		}
		if len(npe.Reasons) > 0 {
			fmt.Fprintln(stdout, "For example:")
			for _, r := range npe.Reasons {
				fmt.Fprintf(stdout, "  - %s\n", r)
			}
		}
	}
	return fmt.Errorf("%w (reasons above)", mig.ErrNoPlan)
}

func migTemplate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mig template", stderr)
	var lf layoutFlags
	lf.register(fs)
	mixFlag := fs.String("mix", "", "demand `mix` as request counts, e.g. 1g.10gb=5,3g.40gb=1 (default: one of every profile)")
	tfile := fs.String("templates", "", "template `file` (JSON, schema "+migfile.TemplateSchema+"); default: the shipped templates")
	mpIn := fs.String("mig-parted", "", "mig-parted configuration `file` whose configurations are the candidate templates")
	mpOut := fs.String("write-mig-parted", "", "write the chosen template as a mig-parted configuration `file`")
	prio := fs.Int("priority", 0, "priority of the reconfiguration (as a pending job's for defrag)")
	var pol mig.Policy
	registerPolicy(fs, &pol)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tfile != "" && *mpIn != "" {
		return errors.New("--templates and --mig-parted exclude each other")
	}
	mix, err := parseMix(*mixFlag)
	if err != nil {
		return err
	}
	file, err := lf.load(stderr, "template")
	if err != nil {
		return err
	}
	if len(file.Layouts) == 0 {
		return fmt.Errorf("%s: %w: no MIG GPUs (templates are for MIG)", lf.path, mig.ErrInvalidLayout)
	}
	if err := checkFleetProfiles(file.Layouts, mixProfiles(mix)...); err != nil {
		return err
	}
	var templates []mig.Template
	if *tfile != "" {
		r, err := os.Open(*tfile)
		if err != nil {
			return err
		}
		defer r.Close()
		if templates, err = migfile.ReadTemplates(r, file.Catalog); err != nil {
			return fmt.Errorf("%s: %w", *tfile, err)
		}
	}
	if *mpIn != "" {
		if templates, err = readPartedTemplates(*mpIn, file.Catalog, stderr); err != nil {
			return err
		}
	}
	ch, err := mig.ChooseTemplate(ctx, file.Layouts, mix, templates, *prio, pol)
	var npe *mig.NoPlanError
	if errors.As(err, &npe) {
		if !lf.asJSON {
			printScores(stdout, ch.Scores, "")
		}
		return printNoPlan(stdout, npe, lf.asJSON, ch.Scores)
	}
	if err != nil {
		return err
	}
	var written *partedOutput
	if *mpOut != "" {
		if written, err = writeParted(*mpOut, ch, file.Layouts); err != nil {
			return err
		}
	}
	if lf.asJSON {
		return writeJSON(stdout, struct {
			*mig.TemplateChoice
			Explanation string        `json:"explanation"`
			MigParted   *partedOutput `json:"migParted,omitempty"`
		}{ch, ch.Plan.Explain(), written})
	}
	fmt.Fprintf(stdout, "Chosen: %s\n", ch.Template)
	if written != nil {
		fmt.Fprintf(stdout, "Wrote %s: configuration %q; select it with the node label %s=%s\n", written.File, written.Config, parted.LabelConfig, written.Config)
	}
	printScores(stdout, ch.Scores, ch.Template.Name)
	fmt.Fprintln(stdout)
	printPlan(stdout, ch.Plan)
	return nil
}

// printScores prints the templates' served demand, marking chosen.
func printScores(stdout io.Writer, scores []mig.TemplateScore, chosen string) {
	fmt.Fprintf(stdout, "%-2s %-20s %-10s %10s %10s  %s\n", "", "TEMPLATE", "PURPOSE", "SERVED", "REQUESTS", "TRANSITION")
	for _, s := range scores {
		mark, tr := "", "blocked: "+s.Blocked
		if s.Template == chosen {
			mark = "*"
		}
		if s.Cost != nil {
			tr = s.Cost.String()
		}
		fmt.Fprintf(stdout, "%-2s %-20s %-10s %10.4g %10.4g  %s\n", mark, s.Template, s.Purpose, s.Served, s.Requests, tr)
	}
}
