package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/mig/migfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const migLayout = `{
  "schema": "gputopo-mig/v1",
  "gpus": [
    {"gpu": "gpu0", "model": "A100-80GB", "instances": [
      {"profile": "1g.10gb", "start": 0, "state": "in-use", "owner": "inf-a", "priority": 1},
      {"profile": "1g.10gb", "start": 4, "state": "in-use", "owner": "inf-b", "priority": 1}
    ]},
    {"gpu": "gpu1", "model": "A100-80GB", "instances": [
      {"profile": "3g.40gb", "start": 0, "state": "in-use", "owner": "train", "priority": 9},
      {"profile": "1g.10gb", "start": 4, "state": "in-use", "owner": "inf-c", "priority": 1}
    ]}
  ],
  "amd": [
    {"gpu": "mi0", "hive": "h0", "model": "MI300X", "compute": "SPX", "memory": "NPS1",
     "work": [{"partition": 0, "owner": "llm", "priority": 3}]},
    {"gpu": "mi1", "hive": "h0", "model": "MI300X", "compute": "SPX", "memory": "NPS1"}
  ]
}`

func migCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"mig"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func migLayoutFile(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "layout.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMigModelsAndProfiles(t *testing.T) {
	code, out, errOut := migCLI(t, "models")
	if code != 0 || !strings.Contains(out, "A100-80GB") || !strings.Contains(out, "MI300X") || !strings.Contains(out, "H200-141GB") {
		t.Fatalf("models: %d %s %s", code, out, errOut)
	}
	code, out, _ = migCLI(t, "profiles", "--model", "NVIDIA A100-SXM4-40GB")
	if code != 0 || !strings.Contains(out, "3g.20gb") || !strings.Contains(out, "{0,4}:4") || !strings.Contains(out, "{0,1,2,3,4,5,6}:1") {
		t.Fatalf("profiles:\n%s", out)
	}
	code, out, _ = migCLI(t, "profiles", "--model", "H100-80GB", "--json")
	var spec mig.ModelSpec
	if code != 0 || json.Unmarshal([]byte(out), &spec) != nil || spec.Name != "H100-80GB" || len(spec.Profiles) != 7 || spec.Profiles[2].Multiprocessors != 26 {
		t.Fatalf("profiles --json: %d %s", code, out)
	}
	code, out, _ = migCLI(t, "profiles", "--model", "MI355X")
	if code != 0 || !strings.Contains(out, "CPX/NPS2") || !strings.Contains(out, "36") {
		t.Fatalf("AMD profiles:\n%s", out)
	}
	if code, _, errOut := migCLI(t, "profiles"); code != 2 || !strings.Contains(errOut, "--model is required") {
		t.Errorf("no --model: %d %s", code, errOut)
	}
	if code, _, errOut := migCLI(t, "profiles", "--model", "Tesla V100"); code != 2 || !strings.Contains(errOut, "unknown GPU model") {
		t.Errorf("unknown model: %d %s", code, errOut)
	}
	if code, _, _ := migCLI(t); code != 2 {
		t.Errorf("no action: %d", code)
	}
	if code, _, errOut := migCLI(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown action") {
		t.Errorf("unknown action: %d %s", code, errOut)
	}
}

func TestMigShow(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	code, out, errOut := migCLI(t, "show", "--layout", f, "--mix", "3g.40gb=1")
	if code != 0 {
		t.Fatalf("show: %d %s", code, errOut)
	}
	for _, want := range []string{"gpu0  A100-80GB  [A...B...]", "unusable 4.0", "does not fit: 3g.40gb 4g.40gb 7g.80gb", "2g.20gb@{2}", "node: 9 of 16 slots free", "mi0  MI300X  hive h0  SPX/NPS1", "partition 0: llm p3"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = migCLI(t, "show", "--layout", f, "--json")
	var doc struct {
		GPUs []struct {
			GPU           string                     `json:"gpu"`
			Free          map[string][]mig.Placement `json:"freePlacements"`
			Fragmentation mig.Fragmentation          `json:"fragmentation"`
		} `json:"gpus"`
		Fragmentation mig.Fragmentation `json:"fragmentation"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.GPUs) != 2 || len(doc.GPUs[0].Free["2g.20gb"]) != 1 || doc.Fragmentation.FreeSlots != 9 {
		t.Fatalf("show --json: %d %s", code, out)
	}
	if code, _, errOut := migCLI(t, "show"); code != 2 || !strings.Contains(errOut, "--layout is required") {
		t.Errorf("no layout: %d %s", code, errOut)
	}
	if code, _, errOut := migCLI(t, "show", "--layout", f, "--mix", "3g=1"); code != 2 || !strings.Contains(errOut, "malformed profile name") {
		t.Errorf("bad mix: %d %s", code, errOut)
	}
	bad := migLayoutFile(t, `{"gpus": [{"gpu": "g", "model": "A30", "instances": [{"profile": "2g.12gb", "start": 1}]}]}`)
	if code, _, errOut := migCLI(t, "show", "--layout", bad); code != 2 || !strings.Contains(errOut, "illegal placement") || !strings.Contains(errOut, "instances[0]") {
		t.Errorf("bad layout: %d %s", code, errOut)
	}
	if code, _, errOut := migCLI(t, "show", "--layout", filepath.Join(t.TempDir(), "missing.json")); code != 2 || errOut == "" {
		t.Errorf("missing file: %d %s", code, errOut)
	}
}

func TestMigPlace(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	code, out, errOut := migCLI(t, "place", "--layout", f, "--profile", "2g.20gb")
	if code != 0 || !strings.Contains(out, "2g.20gb -> gpu0 {2}:2") {
		t.Fatalf("place: %d %s %s", code, out, errOut)
	}
	code, out, _ = migCLI(t, "place", "--layout", f, "--profile", "1g.10gb,1g.10gb", "--owner", "web", "--json")
	var doc struct {
		Assignments []mig.Assignment `json:"assignments"`
		Layouts     json.RawMessage  `json:"layouts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Assignments) != 2 || !doc.Assignments[1].OK() {
		t.Fatalf("place --json: %d %s", code, out)
	}
	// The layouts it prints are a valid layout file with the new instances.
	after, err := migfile.Read(bytes.NewReader(doc.Layouts), nil)
	if err != nil || len(after.Layouts[0].Instances)+len(after.Layouts[1].Instances) != 6 {
		t.Fatalf("printed layouts: %v %v", after, err)
	}
	code, out, errOut = migCLI(t, "place", "--layout", f, "--profile", "7g.80gb")
	if code != 1 || !strings.Contains(out, "no free placement") || !strings.Contains(errOut, "did not fit") {
		t.Errorf("no fit: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := migCLI(t, "place", "--layout", f, "--profile", "1g.10gb", "--strategy", "best"); code != 2 || !strings.Contains(errOut, "unknown strategy") {
		t.Errorf("bad strategy: %d %s", code, errOut)
	}
	code, out, _ = migCLI(t, "place", "--layout", f, "--profile", "1g.10gb", "--strategy", "first-fit")
	if code != 0 || !strings.Contains(out, "gpu0 {1}:1") {
		t.Errorf("first-fit: %s", out)
	}
	if code, _, _ := migCLI(t, "place", "--layout", f); code != 2 {
		t.Errorf("no profile: %d", code)
	}
}

func TestMigDefrag(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	code, out, errOut := migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "10", "--threshold", "10")
	if code != 0 {
		t.Fatalf("defrag: %d %s", code, errOut)
	}
	for _, want := range []string{"free {0}:8 on gpu0", "Move inf-a", "Move inf-b", "no eviction", "Steps:", "create-gi        gpu0 7g.80gb@{0}:8"} {
		if !strings.Contains(out, want) {
			t.Errorf("defrag lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "10", "--json")
	var doc struct {
		Plan        *mig.Plan `json:"plan"`
		Explanation string    `json:"explanation"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.Plan == nil || doc.Plan.Cost.Moves != 2 || len(doc.Plan.Steps) != 12 {
		t.Fatalf("defrag --json: %d %s", code, out)
	}
	// No plan: moves are disabled and a job below the threshold may not evict.
	code, out, errOut = migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "5", "--threshold", "8", "--no-moves")
	if code != 1 || !strings.Contains(out, "No plan for 7g.80gb") || !strings.Contains(out, "below the eviction threshold 8") || !strings.Contains(errOut, "no plan") {
		t.Errorf("no plan: %d %s %s", code, out, errOut)
	}
	code, out, _ = migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "5", "--no-moves", "--json")
	var np struct {
		Reasons []string `json:"reasons"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &np) != nil || len(np.Reasons) == 0 {
		t.Errorf("no plan --json: %d %s", code, out)
	}
	// AMD: a compute-mode change on the idle GPU of the hive.
	code, out, _ = migCLI(t, "defrag", "--layout", f, "--compute", "CPX", "--priority", "5")
	if code != 0 || !strings.Contains(out, "switch mi1 to CPX/NPS1") || !strings.Contains(out, "set-compute-mode") {
		t.Errorf("AMD: %d %s", code, out)
	}
	code, out, _ = migCLI(t, "defrag", "--layout", f, "--compute", "CPX", "--memory", "NPS4", "--priority", "5", "--threshold", "5")
	if code != 0 || !strings.Contains(out, "reloads the driver: 2 GPUs") || !strings.Contains(out, "Evict llm") {
		t.Errorf("AMD NPS4: %d %s", code, out)
	}
	if code, _, errOut := migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--compute", "CPX"); code != 2 || !strings.Contains(errOut, "either --profile") {
		t.Errorf("both: %d %s", code, errOut)
	}
	if code, _, errOut := migCLI(t, "defrag", "--layout", f, "--compute", "XPX"); code != 2 || !strings.Contains(errOut, "unknown compute mode") {
		t.Errorf("bad mode: %d %s", code, errOut)
	}
	if code, _, errOut := migCLI(t, "defrag", "--layout", f, "--profile", "7g"); code != 2 || !strings.Contains(errOut, "malformed profile name") {
		t.Errorf("bad profile: %d %s", code, errOut)
	}
}

// TestMigDefragHugeNoPlan: "no plan" over 5,000 full GPUs prints a bounded
// summary (counts per cause and a few examples), not a line per GPU.
func TestMigDefragHugeNoPlan(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"schema": "gputopo-mig/v1", "gpus": [`)
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"gpu": "gpu%d", "model": "H100-80GB", "instances": [`, i)
		for s := 0; s < 7; s++ {
			if s > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"profile": "1g.10gb", "start": %d, "state": "in-use", "owner": "w%d-%d", "priority": %d}`, s, i, s, (i+s)%10)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	f := migLayoutFile(t, b.String())
	code, out, errOut := migCLI(t, "defrag", "--layout", f, "--profile", "3g.40gb", "--priority", "9", "--move-any", "--no-evictions")
	require.Equal(t, 1, code, errOut)
	assert.Contains(t, out, "No plan for 3g.40gb")
	assert.Contains(t, out, "10000 way(s) of making room rejected")
	assert.Contains(t, out, "no free placements to move")
	assert.Less(t, len(out), 4096, "text output:\n%s", out)
	assert.Less(t, len(errOut), 1024)

	code, out, _ = migCLI(t, "defrag", "--layout", f, "--profile", "3g.40gb", "--priority", "9", "--move-any", "--no-evictions", "--json")
	require.Equal(t, 1, code)
	var np struct {
		Rejected int              `json:"rejected"`
		Causes   []mig.CauseCount `json:"causes"`
		Reasons  []string         `json:"reasons"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &np))
	assert.Equal(t, 10000, np.Rejected)
	assert.Equal(t, []mig.CauseCount{{Cause: mig.CauseNoRoom, Count: 10000}}, np.Causes)
	assert.LessOrEqual(t, len(np.Reasons), 3, "at most three examples per cause (mig limit maxNoPlanExamples)")
	assert.Less(t, len(out), 4096, "JSON output:\n%s", out)
}

func TestMigMixRejectsNonFinite(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	for _, mix := range []string{"1g.10gb=inf", "1g.10gb=NaN", "1g.10gb=-1", "1g.10gb=1e308,mig-1g.10gb=1e308"} {
		code, _, errOut := migCLI(t, "show", "--layout", f, "--mix", mix)
		assert.Equal(t, 2, code, mix)
		assert.Contains(t, errOut, "--mix", mix)
	}
}

// TestMigDefragThreshold: the case. A job below the threshold
// (--priority 5 --threshold 10) gets no plan rather than one that restarts
// the inference work by moving it; --allow-moves-below-threshold restores
// the moving plan, still without evictions.
func TestMigDefragThreshold(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	code, out, errOut := migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "5", "--threshold", "10")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, string(mig.CauseBelowThreshold))
	assert.Contains(t, out, "below the disruption threshold 10")
	assert.Contains(t, errOut, "no plan")
	code, out, errOut = migCLI(t, "defrag", "--layout", f, "--profile", "7g.80gb", "--priority", "5", "--threshold", "10", "--allow-moves-below-threshold", "--json")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Plan *mig.Plan `json:"plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, 2, doc.Plan.Cost.Moves)
	assert.Zero(t, doc.Plan.Cost.Evictions)
}

func TestMigTemplate(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	// gpu0 runs 1g at 0 and 4, gpu1 a 3g at 0 and a 1g at 4. Demand: five
	// 1g and one 3g. all-1g.10gb serves 5 slices, balanced (2×1g, 1×2g,
	// 1×3g per GPU) 4 + 4 = 8.
	code, out, errOut := migCLI(t, "template", "--layout", f, "--mix", "1g.10gb=5,3g.40gb=1", "--priority", "10", "--threshold", "10")
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"Chosen: balanced (A100-80GB, mixed)", "*  balanced", "all-1g.10gb", "whole-gpu", "Apply template balanced", "Steps:", "create-gi"} {
		assert.Contains(t, out, want)
	}
	code, out, errOut = migCLI(t, "template", "--layout", f, "--mix", "1g.10gb=5,3g.40gb=1", "--priority", "10", "--threshold", "10", "--json")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Template    mig.Template        `json:"template"`
		Served      float64             `json:"served"`
		Scores      []mig.TemplateScore `json:"scores"`
		Plan        *mig.Plan           `json:"plan"`
		Explanation string              `json:"explanation"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "balanced", doc.Template.Name)
	assert.Equal(t, 8.0, doc.Served)
	assert.Len(t, doc.Scores, 5)
	require.NotNil(t, doc.Plan)
	assert.Equal(t, "balanced", doc.Plan.Template)
	assert.NotEmpty(t, doc.Explanation)

	// Below the threshold the in-use work may not move: every shipped
	// template needs to move some, so there is no plan, and the scores
	// say why.
	code, out, errOut = migCLI(t, "template", "--layout", f, "--mix", "1g.10gb=5,3g.40gb=1", "--priority", "5", "--threshold", "10")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "blocked: ")
	assert.Contains(t, out, string(mig.CauseBelowThreshold))
	assert.Contains(t, errOut, "no plan")

	// A user template file: two 3g per GPU.
	dir := t.TempDir()
	tf := filepath.Join(dir, "t.json")
	require.NoError(t, os.WriteFile(tf, []byte(`{"schema":"gputopo-mig-templates/v1","templates":[
	  {"name":"two-3g","model":"A100-80GB","purpose":"training","profiles":[{"profile":"3g.40gb","count":2}]}]}`), 0o600))
	code, out, errOut = migCLI(t, "template", "--layout", f, "--mix", "3g.40gb=3", "--templates", tf, "--priority", "10", "--threshold", "10")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Chosen: two-3g")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"templates":[{"name":"x","model":"A100-80GB","profiles":[{"profile":"7g.80gb","count":2}]}]}`), 0o600))
	code, _, errOut = migCLI(t, "template", "--layout", f, "--templates", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "bad.json")
	code, _, _ = migCLI(t, "template", "--layout", f, "--mix", "1g.10gb=-1")
	assert.NotEqual(t, 0, code)
	code, _, _ = migCLI(t, "template")
	assert.Equal(t, 2, code)
}

// Candidates from a mig-parted configuration; the choice written back as
// one, with the label that selects it.
func TestMigTemplateParted(t *testing.T) {
	f := migLayoutFile(t, migLayout)
	dir := t.TempDir()
	in := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(in, []byte(`version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  two-3g:
    - device-filter: ["0x20B510DE", "0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  seven-1g:
    - device-filter: "0x20B210DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
`), 0o600))
	out := filepath.Join(dir, "chosen.yaml")
	code, stdout, errOut := migCLI(t, "template", "--layout", f, "--mix", "3g.40gb=3", "--mig-parted", in, "--write-mig-parted", out, "--priority", "10", "--threshold", "10")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, stdout, "Chosen: two-3g (A100-80GB, mig-parted)")
	assert.Contains(t, stdout, "seven-1g")
	assert.Contains(t, stdout, "nvidia.com/mig.config=two-3g")
	assert.Contains(t, errOut, "all-disabled: no entry gives a template")
	written, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(written), "\"two-3g\":\n    - device-filter: [\"0x20B210DE\", \"0x20B510DE\", \"0x20F310DE\", \"0x20F510DE\"]\n      devices: all\n      mig-enabled: true\n      mig-devices:\n        \"3g.40gb\": 2\n")

	code, stdout, errOut = migCLI(t, "template", "--layout", f, "--mix", "3g.40gb=3", "--mig-parted", in, "--write-mig-parted", out, "--priority", "10", "--threshold", "10", "--json")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Template  mig.Template `json:"template"`
		MigParted struct {
			Config string            `json:"config"`
			Labels map[string]string `json:"labels"`
		} `json:"migParted"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
	assert.Equal(t, "two-3g", doc.MigParted.Config)
	assert.Equal(t, map[string]string{"nvidia.com/mig.config": "two-3g"}, doc.MigParted.Labels)

	// Errors: both sources, a malformed file, no template in it.
	code, _, _ = migCLI(t, "template", "--layout", f, "--mig-parted", in, "--templates", in)
	assert.Equal(t, 2, code)
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("version: v9\n"), 0o600))
	code, _, errOut = migCLI(t, "template", "--layout", f, "--mig-parted", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "bad.yaml")
	none := filepath.Join(dir, "none.yaml")
	require.NoError(t, os.WriteFile(none, []byte("version: v1\nmig-configs:\n  disabled: [{devices: all, mig-enabled: false}]\n"), 0o600))
	code, _, errOut = migCLI(t, "template", "--layout", f, "--mig-parted", none)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "no configuration is a template")
}
