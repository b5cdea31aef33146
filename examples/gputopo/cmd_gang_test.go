package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func gangArgs(job string, extra ...string) []string {
	return append([]string{"gang", "--cluster", "testdata/gang/nvl72.yaml", "--job", "testdata/gang/" + job}, extra...)
}

func TestGangFitsTightestRack(t *testing.T) {
	code, out, errOut := runCLI(t, gangArgs("mnnvl-16.yaml")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// rack r1 has exactly 16 free trays: the tightest partition that fits
	for _, want := range []string{"job mnnvl-train: fits", `nvidia.com/gpu.clique "r1/8d4f21a0-0000-4000-8000-000000000001.1"`, "16 new pods on 16 nodes, 64 GPUs", "mnnvl-train-worker-15"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "r1-t0 ") || strings.Contains(out, "r1-t1 ") {
		t.Errorf("placed on a busy tray:\n%s", out)
	}
}

func TestGangNeverFitsAndSlices(t *testing.T) {
	code, out, _ := runCLI(t, gangArgs("mnnvl-20.yaml")...)
	if code != exitNoFit || !strings.Contains(out, "never-fits") || !strings.Contains(out, "the largest of the 4 holds 18") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, gangArgs("mnnvl-32-sliced.yaml")...)
	if code != 0 || !strings.Contains(out, "fits") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// two sub-groups of 16, each within one rack; the tray without a clique
	// label is never used
	if strings.Contains(out, "r3-t17") {
		t.Errorf("used a tray whose NVLink fabric is not ready:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	subGroups := map[string]map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 4 && strings.HasPrefix(f[0], "mnnvl-sliced-worker-") {
			rack := strings.SplitN(f[1], "-", 2)[0]
			if subGroups[f[3]] == nil {
				subGroups[f[3]] = map[string]bool{}
			}
			subGroups[f[3]][rack] = true
		}
	}
	if len(subGroups) != 2 || len(subGroups["0"]) != 1 || len(subGroups["1"]) != 1 {
		t.Errorf("sub-groups by rack %v:\n%s", subGroups, out)
	}
}

func TestGangPreempt(t *testing.T) {
	code, out, errOut := runCLI(t, gangArgs("mnnvl-72.yaml", "--preempt", "--summary")...)
	if code != exitNoFit {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"job full-rack: fragmented", "preemption: evict 1 whole jobs", "notebook3", "fewest possible", "being released by old"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestGangQueue(t *testing.T) {
	code, out, errOut := runCLI(t, gangArgs("queue.yaml")...)
	if code != exitNoFit { // some jobs wait
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"pretrain    10    216   0           reserve", "fits beside the reservation of pretrain", "too-big", "never-fits",
		"reservation: pretrain starts when they end (run times unknown) on 54 nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, gangArgs("queue.yaml", "--no-reservation", "--summary")...)
	if code != exitNoFit || strings.Contains(out, "reservation:") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestGangJSON(t *testing.T) {
	code, out, errOut := runCLI(t, gangArgs("mnnvl-16.yaml", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Verdict   string
		Placement struct {
			Domain string
			Pods   []struct {
				Node    string
				Devices []int
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Verdict != "fits" || len(r.Placement.Pods) != 16 || len(r.Placement.Pods[0].Devices) != 4 {
		t.Fatalf("%+v", r)
	}
	code, out, _ = runCLI(t, gangArgs("queue.yaml", "--json")...)
	var q struct {
		Entries []struct {
			Job    string
			Action string
		}
		Reservation *struct{ Job string }
	}
	if code != exitNoFit || json.Unmarshal([]byte(out), &q) != nil || len(q.Entries) != 5 || q.Reservation == nil || q.Reservation.Job != "pretrain" {
		t.Fatalf("exit %d: %s", code, out)
	}
	code, out, _ = runCLI(t, gangArgs("mnnvl-72.yaml", "--json", "--preempt")...)
	if code != exitNoFit || !strings.Contains(out, `"victims"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// A cluster file with an inline topology written by `gputopo show`.
func TestGangInlineTopology(t *testing.T) {
	code, js, _ := runCLI(t, "show", "--machine", "dgx-h100", "--json")
	if code != 0 {
		t.Fatal("show failed")
	}
	dir := t.TempDir()
	cluster := "levels: [example.com/rack]\nnodes:\n  - name: h{i}\n    count: 2\n    labels: {example.com/rack: r0}\n    topology: " +
		strings.ReplaceAll(js, "\n", " ") + "\nallocations:\n  - {job: a, node: h0, gpus: [0, 1, 2, 3, 4, 5]}\n"
	job := "name: pair\npodSets: [{name: w, replicas: 3, gpus: 4, scope: fabric}]\n"
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cluster), 0o644)
	os.WriteFile(filepath.Join(dir, "j.yaml"), []byte(job), 0o644)
	code, out, errOut := runCLI(t, "gang", "--cluster", filepath.Join(dir, "c.yaml"), "--job", filepath.Join(dir, "j.yaml"))
	if code != exitNoFit || !strings.Contains(out, "job pair: blocked") || !strings.Contains(out, "needs 12 GPUs, 10 are free") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

func TestGangUsageErrors(t *testing.T) {
	if code, _, errOut := runCLI(t, "gang", "--job", "testdata/gang/mnnvl-16.yaml"); code != 2 || !strings.Contains(errOut, "--cluster are required") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, gangArgs("mnnvl-16.yaml", "--strategy", "random")...); code != 2 || !strings.Contains(errOut, "unknown strategy") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "gang", "--cluster", "testdata/gang/nvl72.yaml", "--job", "testdata/gang/missing.yaml"); code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// a cluster file given as the job file: a parse error naming the field
	if code, _, errOut := runCLI(t, "gang", "--cluster", "testdata/gang/nvl72.yaml", "--job", "testdata/gang/nvl72.yaml"); code != 2 || !strings.Contains(errOut, "unknown field") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "gang", "--cluster", "testdata/gang/mnnvl-16.yaml", "--job", "testdata/gang/mnnvl-16.yaml"); code != 2 || !strings.Contains(errOut, "malformed input") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestGangHostileFiles: small hostile cluster and job files fail with a
// clear error naming the limit, instead of costing memory.
func TestGangHostileFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := write("job.yaml", "name: a\npodSets: [{name: w, replicas: 1, gpus: 1}]\n")
	cluster := write("cluster.yaml", "nodes: [{name: x0, machine: dgx-h100}]\n")
	for _, c := range []struct{ name, cluster, job, want string }{
		{"count", write("count.yaml", `nodes: [{name: "n{i}", count: 1000000000, machine: dgx-h100}]`), job, "MaxNodes"},
		{"aliases", write("laughs.yaml", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"+
			"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"), job, "excessive aliasing"},
		{"replicas", cluster, write("replicas.yaml", "name: a\npodSets: [{name: w, replicas: 1000000000, gpus: 8}]\n"), "MaxJobPods"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, "gang", "--cluster", c.cluster, "--job", c.job)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, want a failure naming %q: %s", code, c.want, errOut)
			}
		})
	}
}

// TestGangShares places a gang of inference pods asking for shares on two
// partly used H100 nodes: every pod gets one GPU and its share, no GPU
// takes more shares than its free memory and compute allow.
func TestGangShares(t *testing.T) {
	code, out, errOut := runCLI(t, "gang", "--cluster", "testdata/gang/infer-cluster.yaml", "--job", "testdata/gang/infer-shared.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"job infer: fits", "8 shares (160GiB of GPU memory)", "8 new pods on 1 nodes, 0 GPUs, 8 shares"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	perGPU := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && strings.HasPrefix(f[0], "infer-server-") {
			if !strings.HasSuffix(f[2], "(shared:20GiB,250m)") {
				t.Errorf("pod line %q lacks its share", l)
			}
			perGPU[f[1]+"/"+strings.SplitN(f[2], "(", 2)[0]]++
		}
	}
	total := 0
	for g, n := range perGPU {
		total += n
		// h100-a gpu4 holds 60 GiB and 500m already: one more 20 GiB share;
		// a free GPU takes four; GPUs 0-3 of h100-a are held whole.
		switch {
		case g == "h100-a/4" && n > 1, n > 4:
			t.Errorf("%s takes %d shares", g, n)
		case g == "h100-a/0" || g == "h100-a/1" || g == "h100-a/2" || g == "h100-a/3":
			t.Errorf("share on a GPU held whole: %s", g)
		}
	}
	if total != 8 {
		t.Errorf("%d pods listed, want 8:\n%s", total, out)
	}
}

func TestGangHierarchical(t *testing.T) {
	args := []string{"gang", "--cluster", "testdata/gang/hier-cluster.yaml", "--job", "testdata/gang/hier-infer.yaml"}
	code, out, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"job infer: fits (optimal)", `example.com/rack "r1"`, `infer/prefill            required clique  fits     nvidia.com/gpu.clique "r1/`, "infer-prefill-w-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// every node held: blocked, and --preempt clears rack r1 of its
	// low-priority jobs
	args = []string{"gang", "--cluster", "testdata/gang/hier-busy.yaml", "--job", "testdata/gang/hier-infer.yaml", "--preempt", "--json"}
	code, out, _ = runCLI(t, args...)
	if code != exitNoFit {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var res struct {
		Verdict  string `json:"verdict"`
		Clearing struct {
			Domain  string `json:"domain"`
			Exact   bool   `json:"exact"`
			Victims []struct {
				Job string `json:"job"`
			} `json:"victims"`
		} `json:"clearing"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Verdict != "blocked" || res.Clearing.Domain != "r1" || !res.Clearing.Exact || len(res.Clearing.Victims) != 5 {
		t.Errorf("%+v\n%s", res, out)
	}
	for _, v := range res.Clearing.Victims {
		if v.Job == "batch-c" || v.Job == "prod" {
			t.Errorf("evicts %s, which is not needed or not lower priority", v.Job)
		}
	}
}

func TestGangFairShareAndWait(t *testing.T) {
	code, out, _ := runCLI(t, "gang", "--cluster", "testdata/gang/hier-busy.yaml", "--job", "testdata/gang/fairshare.yaml", "--summary")
	if code != exitNoFit {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"search-index  search  16    start", "reclaim: evict 1 surplus pods of batch-a", "reclaim: evict whole job of batch-b",
		"vision-eval   vision  8     reserve", "would exceed its gpu limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "gang", "--cluster", "testdata/gang/hier-cluster.yaml", "--job", "testdata/gang/wait.yaml")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"uses rack; a looser level becomes acceptable in 2h30m0s", "clique    true        0s       false", "start"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
