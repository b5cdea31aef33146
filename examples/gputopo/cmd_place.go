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

	"github.com/gputopo/gputopo/examples/gputopo/internal/webui"
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
	if *scopeRequired {
		req.ScopeMode = scoring.ModeRequired
	}
	ns, err := webui.Place(node, webui.PlaceQuery{Busy: busyList, Request: req, Trade: *trade})
	if err != nil {
		return err
	}
	if *asJSON {
		return writePlaceJSON(stdout, ns, *trade)
	}
	return renderPlacement(stdout, origin, ns, *trade)
}

// parseDeviceList parses "0,2,4-6" (webui.ParseDeviceList: /api/place
// reads its lists the same way).
func parseDeviceList(s string, n int) ([]int, error) { return webui.ParseDeviceList(s, n) }

func writePlaceJSON(w io.Writer, ns scoring.NodeScore, trade bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(webui.NewPlaceOutput(ns, trade))
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
		fmt.Fprintf(w, "Policy: request first (ring class, then the set's own lanes, NUMA and PCIe locality; look-ahead and packing break ties)\n\n")
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
