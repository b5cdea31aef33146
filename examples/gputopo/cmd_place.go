package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gputopo/gputopo/scoring"
)

func init() {
	register(command{name: "place", summary: "choose the best devices for a request on a node and explain the choice", run: runPlace})
}

func runPlace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("place", stderr)
	var src sourceFlags
	src.register(fs)
	gpus := fs.Int("gpus", 1, "number of devices `N` to place")
	busy := fs.String("busy", "", "devices already in use, e.g. `0,3-5`")
	require := fs.String("require", "", "devices the set must contain, e.g. `4`")
	exclude := fs.String("exclude", "", "devices the set must not contain")
	var scope scoring.Scope
	fs.TextVar(&scope, "scope", scoring.ScopeNone, "keep the set within one `SCOPE`: none, fabric, pcie, numa or package (see --scope-mode)")
	var scopeMode scoring.Mode // zero: required, as in Go and in gang files
	fs.TextVar(&scopeMode, "scope-mode", scoring.ModeRequired, "whether --scope is required (a hard constraint) or preferred (a score term)")
	scopeRequired := fs.Bool("scope-required", false, "deprecated: the same as --scope-mode required, now the default")
	trade := fs.Bool("trade", false, "weigh every component in one mean (scoring.Weights.Trade), so look-ahead and packing may cost this request ring bandwidth; by default the request comes first")
	asJSON := fs.Bool("json", false, "print JSON with a top-level \"devices\" array")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	node, origin, err := src.load(ctx)
	if err != nil {
		return err
	}
	n := node.Len()
	busyList, err := parseDeviceList(*busy, n)
	if err != nil {
		return fmt.Errorf("--busy: %w", err)
	}
	busyList = withCaptured(busyList, src.busy) // --cluster: its running pods' devices
	req := scoring.Request{Count: *gpus}
	if req.Required, err = parseDeviceList(*require, n); err != nil {
		return fmt.Errorf("--require: %w", err)
	}
	if req.Excluded, err = parseDeviceList(*exclude, n); err != nil {
		return fmt.Errorf("--exclude: %w", err)
	}
	req.Scope, req.ScopeMode = scope, scopeMode
	if *trade {
		w := scoring.DefaultWeights()
		w.Trade = true
		req.Weights = &w
	}
	if *scopeRequired {
		req.ScopeMode = scoring.ModeRequired
	}
	state := scoring.NewStateFor(node)
	if err := state.Allocate(busyList...); err != nil {
		return fmt.Errorf("--busy: %w", err)
	}
	ns, err := scoring.ScoreNode(node, state, req, scoring.WithExplanation())
	if err != nil {
		return err
	}
	if *asJSON {
		return writePlaceJSON(stdout, ns, *trade)
	}
	return renderPlacement(stdout, origin, ns, *trade)
}

// parseDeviceList parses "0,2,4-6" into device indices below n. The empty
// string is the empty list; repeats, reversed ranges and indices outside
// 0..n-1 are errors.
func parseDeviceList(s string, n int) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseIndex(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = parseIndex(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: reversed range", part)
			}
		}
		if b >= n {
			return nil, fmt.Errorf("%q: device %d out of range (the node has %d devices)", part, b, n)
		}
		for i := a; i <= b; i++ {
			if seen[i] {
				return nil, fmt.Errorf("device %d listed twice", i)
			}
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

func parseIndex(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 6 || strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("want a device index")
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("want a device index")
	}
	return v, nil
}

type placeComponent struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Weight float64 `json:"weight"`
	Detail string  `json:"detail"`
}

type placeRunnerUp struct {
	Devices    []int            `json:"devices"`
	Score      float64          `json:"score"`
	Components []placeComponent `json:"components"`
	Why        string           `json:"why"`
}

type placeOutput struct {
	Devices []int `json:"devices"`
	// Policy is "request-first" (the default) or "trade" (--trade).
	Policy     string           `json:"policy"`
	Score      float64          `json:"score"`
	NodeScore  int64            `json:"nodeScore"`
	Exact      bool             `json:"exact"`
	Components []placeComponent `json:"components"`
	RunnerUp   *placeRunnerUp   `json:"runnerUp,omitempty"`
}

func placeComponents(cs []scoring.Component) []placeComponent {
	out := make([]placeComponent, len(cs))
	for i, c := range cs {
		out[i] = placeComponent{c.Name, c.Value, c.Weight, c.Detail}
	}
	return out
}

// policyName names the ordering the placement used.
func policyName(trade bool) string {
	if trade {
		return "trade"
	}
	return "request-first"
}

func writePlaceJSON(w io.Writer, ns scoring.NodeScore, trade bool) error {
	r := ns.Result
	out := placeOutput{Devices: r.Devices(), Policy: policyName(trade), Score: r.Score, NodeScore: ns.Score, Exact: r.Exact, Components: placeComponents(r.Components)}
	if ru := r.RunnerUp; ru != nil {
		out.RunnerUp = &placeRunnerUp{Devices: ru.Set.Indices(), Score: ru.Score, Components: placeComponents(ru.Components), Why: ru.Why}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func renderPlacement(w io.Writer, origin string, ns scoring.NodeScore, trade bool) error {
	r := ns.Result
	exact := "proven optimal"
	if !r.Exact {
		exact = "collapsed-clique search, not proven optimal"
	}
	fmt.Fprintf(w, "%s\n\n", origin)
	fmt.Fprintf(w, "Chosen: %s  score %.4f  node score %d/%d  (%s)\n", gpuList(r.Devices()), r.Score, ns.Score, scoring.MaxNodeScore, exact)
	if trade {
		fmt.Fprintf(w, "Policy: trade (the weighted mean of every component decides)\n\n")
	} else {
		fmt.Fprintf(w, "Policy: request first (ring class, then own quality; look-ahead and packing break ties)\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tVALUE\tWEIGHT\tDETAIL")
	for _, c := range r.Components {
		fmt.Fprintf(tw, "%s\t%.3f\t%g\t%s\n", c.Name, c.Value, c.Weight, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ru := r.RunnerUp; ru != nil {
		fmt.Fprintf(w, "\nRunner-up: %s  score %.4f\n  why it lost: %s\n", gpuList(ru.Set.Indices()), ru.Score, ru.Why)
	} else {
		fmt.Fprintln(w, "\nNo runner-up: this was the only candidate.")
	}
	return nil
}

func gpuList(devs []int) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = "GPU" + strconv.Itoa(d)
	}
	return strings.Join(parts, ",")
}
