package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/sysfstest"
)

// TestCLI is the command-line contract in one table: every command's help
// (exit 0, on stdout), the --json output flag on every data command, the
// documented exit codes, and the helpful messages for common mistakes.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	// A header-less nvidia-smi printout with a NIC row and a NIC legend.
	headerless := write("headerless.txt", "GPU0\t X \tNV4\tPIX\t0-11\t0\nGPU1\tNV4\t X \tPXB\t0-11\t0\nNIC0\tPIX\tPXB\t X \n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
	smi := write("smi.txt", "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n")
	layout := migLayoutFile(t, migLayout)
	missing := filepath.Join(dir, "missing.json")
	// A KFD capture's parent: the capture of /sys/class/kfd/kfd holds topology/.
	kfdParent := filepath.Join(dir, "kfd")
	require.NoError(t, os.MkdirAll(filepath.Join(kfdParent, "topology", "nodes"), 0o755))
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI300X8("SPX", "NPS1")))
	amdRoot := filepath.Join(dir, "amd")
	require.NoError(t, tr.WriteDir(amdRoot))
	srv := captureAPI(t)
	kubeconfig := captureKubeconfig(t, dir, srv.URL, "t0k")

	commandNames := []string{"capture", "detect", "gang", "kube", "machines", "mig", "place", "serve", "show", "simulate"}
	for _, name := range commandNames {
		require.Contains(t, commands, name, "the table below covers every command")
	}
	require.Len(t, commands, len(commandNames), "a new command needs rows in this table")

	type row struct {
		name   string
		args   []string
		code   int
		json   bool     // stdout is one JSON document
		out    []string // stdout contains
		errOut []string // stderr contains
		not    []string // neither stdout nor stderr contains
	}
	rows := []row{
		// The command list and help.
		{name: "no args", args: nil, code: exitOK, out: []string{"commands:", "show", "exit codes:"}},
		{name: "-h", args: []string{"-h"}, code: exitOK, out: []string{"commands:", "  3  internal error"}, not: []string{"-topology"}},
		{name: "--help", args: []string{"--help"}, code: exitOK, out: []string{"commands:"}},
		{name: "help", args: []string{"help"}, code: exitOK, out: []string{"commands:", "--json"}},
		{name: "help place", args: []string{"help", "place"}, code: exitOK, out: []string{"-gpus"}, not: []string{"commands:"}},
		{name: "help unknown", args: []string{"help", "nope"}, code: exitUsage, errOut: []string{`unknown command "nope"`}},
		{name: "unknown command", args: []string{"sho"}, code: exitUsage, errOut: []string{`unknown command "sho"`, `did you mean "show"?`}},

		// Every command's -h: exit 0, usage on stdout, hidden aliases left out.
		{name: "capture -h", args: []string{"capture", "-h"}, code: exitOK, out: []string{"usage: gputopo capture", "-json"}},
		{name: "detect -h", args: []string{"detect", "-h"}, code: exitOK, out: []string{"usage: gputopo detect", "-json", "-kfd"}, not: []string{"-format"}},
		{name: "gang -h", args: []string{"gang", "-h"}, code: exitOK, out: []string{"usage: gputopo gang", "-json", "exit codes:"}},
		{name: "kube -h", args: []string{"kube", "-h"}, code: exitOK, out: []string{"usage: gputopo kube", "-json"}},
		{name: "machines -h", args: []string{"machines", "-h"}, code: exitOK, out: []string{"usage: gputopo machines", "-json"}},
		{name: "mig -h", args: []string{"mig", "-h"}, code: exitOK, out: []string{"usage: gputopo mig", "--json"}},
		{name: "mig show -h", args: []string{"mig", "show", "-h"}, code: exitOK, out: []string{"-layout", "-json"}},
		{name: "place -h", args: []string{"place", "-h"}, code: exitOK, out: []string{"-gpus", "-json"}},
		{name: "serve -h", args: []string{"serve", "-h"}, code: exitOK, out: []string{"usage: gputopo serve", "-addr", "-layout", "-gang-cluster"}},
		{name: "show -h", args: []string{"show", "-h"}, code: exitOK, out: []string{"usage: gputopo show", "-json", "-dot", "-format", "nccl", "topograph"}},
		{name: "simulate -h", args: []string{"simulate", "-h"}, code: exitOK, out: []string{"usage: gputopo simulate", "-json", "-q"}},

		// --json on every data command.
		{name: "show --json", args: []string{"show", "--machine", "dgx-h100", "--json"}, code: exitOK, json: true},
		{name: "show --format json (hidden alias)", args: []string{"show", "--machine", "dgx-h100", "--format", "json"}, code: exitOK, json: true},
		{name: "detect --json", args: []string{"detect", "--root", amdRoot, "--json"}, code: exitOK, json: true, errOut: []string{"amd: detected"}},
		{name: "machines --json", args: []string{"machines", "--json"}, code: exitOK, json: true, out: []string{`"name": "dgx-h100"`}},
		{name: "place --json", args: []string{"place", "--machine", "dgx-h100", "--gpus", "2", "--json"}, code: exitOK, json: true, out: []string{`"devices"`}},
		{name: "gang --json", args: gangArgs("mnnvl-16.yaml", "--json"), code: exitOK, json: true},
		{name: "mig models --json", args: []string{"mig", "models", "--json"}, code: exitOK, json: true},
		{name: "mig show --json", args: []string{"mig", "show", "--layout", layout, "--json"}, code: exitOK, json: true},
		{name: "kube labels --json", args: []string{"kube", "--machine", "dgx-h100", "--json"}, code: exitOK, json: true},
		{name: "kube patch --json", args: []string{"kube", "--machine", "dgx-h100", "--output", "patch", "--json"}, code: exitOK, json: true, out: []string{`"metadata"`}},
		{name: "kube slices --json", args: []string{"kube", "--machine", "dgx-h100", "--output", "slices", "--json"}, code: exitOK, json: true},
		{name: "simulate --json", args: []string{"simulate", "--synthetic", "20", "--seeds", "1", "--policies", "FGD", "--json", "-q"}, code: exitOK, json: true, out: []string{`"at100"`}},
		{name: "capture --json", args: []string{"capture", "--kubeconfig", kubeconfig, "--json"}, code: exitOK, json: true, out: []string{`"nodes"`}},

		// Exit codes: does not fit, no plan, bad input.
		{name: "gang fits", args: gangArgs("mnnvl-16.yaml"), code: exitOK},
		{name: "gang does not fit", args: gangArgs("mnnvl-20.yaml"), code: exitNoFit, out: []string{"never-fits"}},
		{name: "gang does not fit --json", args: gangArgs("mnnvl-20.yaml", "--json"), code: exitNoFit, json: true},
		{name: "place does not fit", args: []string{"place", "--machine", "dgx-h100", "--gpus", "9"}, code: exitNoFit, errOut: []string{"insufficient devices"}},
		{name: "mig place does not fit", args: []string{"mig", "place", "--layout", layout, "--profile", "7g.80gb"}, code: exitNoFit, errOut: []string{"did not fit"}},
		{name: "mig defrag no plan", args: []string{"mig", "defrag", "--layout", layout, "--profile", "7g.80gb", "--priority", "5", "--threshold", "10"}, code: exitNoFit, errOut: []string{"no plan"}},
		{name: "bad flag", args: []string{"show", "--no-such-flag"}, code: exitUsage},
		{name: "bad flag value", args: []string{"simulate", "--tie", "coin"}, code: exitUsage, errOut: []string{"unknown --tie"}},
		{name: "malformed file", args: []string{"show", "--topology", write("bad.json", `{"schema":"gputopo/v1","devices":[{]}`)}, code: exitUsage, errOut: []string{"malformed"}},

		// Common mistakes get a hint.
		{name: "flag before the command", args: []string{"--json", "show"}, code: exitUsage, errOut: []string{"the command comes first", "gputopo show --json"}},
		{name: "flags without a command", args: []string{"--machine", "dgx-h100"}, code: exitUsage, errOut: []string{"the command comes first", "gputopo show --machine dgx-h100"}},
		{name: "flag before mig", args: []string{"--json", "mig", "models"}, code: exitUsage, errOut: []string{"gputopo mig models --json"}},
		{name: "file without --topology", args: []string{"show", smi}, code: exitUsage, errOut: []string{"--topology " + smi}},
		{name: "flag after an argument", args: []string{"machines", "x", "--json"}, code: exitUsage, errOut: []string{"unexpected arguments", "gputopo help machines"}},
		{name: "--kfd given the parent", args: []string{"detect", "--kfd", kfdParent}, code: exitUsage, errOut: []string{"--kfd " + filepath.Join(kfdParent, "topology")}},
		{name: "missing topology file", args: []string{"show", "--topology", missing}, code: exitUsage, errOut: []string{"topology file " + missing + ": file does not exist"}, not: []string{"line 0", "malformed"}},
		{name: "missing gang file", args: []string{"gang", "--cluster", missing, "--job", missing}, code: exitUsage, errOut: []string{"file " + missing + ": file does not exist"}},
		{name: "unknown model warned", args: []string{"show", "--topology", smi, "--model", "Frobnitz 9000"}, code: exitOK, out: []string{`"Frobnitz 9000" is not in the link-rate table`}},
		{name: "unknown model warned (--json)", args: []string{"show", "--topology", smi, "--model", "Frobnitz 9000", "--json"}, code: exitOK, json: true, errOut: []string{"warning:", "link-rate table"}},
		{name: "header-less matrix with NIC rows", args: []string{"show", "--topology", headerless, "--model", "NVIDIA H100 80GB HBM3"}, code: exitOK, out: []string{"GPU0: mlx5_0 (PIX)", "GPU1: mlx5_0 (PXB)"}, not: []string{"NIC0 (PIX)"}},
		{name: "NIC names in JSON", args: []string{"show", "--topology", headerless, "--json"}, code: exitOK, json: true, out: []string{`"device": "mlx5_0"`}},
		{name: "DOT labels escaped once", args: []string{"show", "--machine", "dgx-h100", "--dot"}, code: exitOK, out: []string{`label="GPU0\n`, `label="NVSwitch"`, `label="mlx5_0"`}, not: []string{`\\n`, "d0 -- d1 "}},
		{name: "--json and --dot", args: []string{"show", "--machine", "dgx-h100", "--json", "--dot"}, code: exitUsage, errOut: []string{"not both"}},
		{name: "simulate progress", args: []string{"simulate", "--synthetic", "20", "--seeds", "1,2", "--policies", "FGD"}, code: exitOK, errOut: []string{"[1/2] FGD seed", "[2/2] FGD seed"}, not: []string{"wrote"}},
		{name: "simulate -q", args: []string{"simulate", "--synthetic", "20", "--seeds", "1", "--policies", "FGD", "-q"}, code: exitOK, not: []string{"[1/1]"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, r.args...)
			require.Equal(t, r.code, code, "exit code; stdout:\n%s\nstderr:\n%s", out, errOut)
			if r.json {
				assert.True(t, json.Valid([]byte(out)), "stdout is not JSON:\n%s", out)
			}
			for _, s := range r.out {
				assert.Contains(t, out, s)
			}
			for _, s := range r.errOut {
				assert.Contains(t, errOut, s)
			}
			for _, s := range r.not {
				assert.NotContains(t, out+errOut, s)
			}
		})
	}
}

// simulate writes nothing into the working directory unless --out names
// a directory.
func TestSimulateWritesNothingByDefault(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	code, out, errOut := runCLI(t, "simulate", "--synthetic", "20", "--seeds", "1", "--policies", "FGD", "-q")
	require.Equal(t, exitOK, code, errOut)
	entries, err := os.ReadDir(wd)
	require.NoError(t, err)
	assert.Empty(t, entries, "files written into the working directory")
	assert.NotContains(t, out, "wrote")

	code, out, errOut = runCLI(t, "simulate", "--synthetic", "20", "--seeds", "1", "--policies", "FGD", "-q", "--out", "res")
	require.Equal(t, exitOK, code, errOut)
	assert.FileExists(t, filepath.Join(wd, "res", "fgd-seed1.csv"))
	assert.True(t, strings.Contains(out, "wrote 1 run CSVs"), out)
}

// A panic in a command is an internal error: exit 3 and a message, not a
// crash.
func TestPanicIsInternalError(t *testing.T) {
	register(command{name: "panics-for-test", run: func(_ context.Context, _ []string, _, _ io.Writer) error { panic("boom") }})
	t.Cleanup(func() { delete(commands, "panics-for-test") })
	code, _, errOut := runCLI(t, "panics-for-test")
	assert.Equal(t, exitInternal, code)
	assert.Contains(t, errOut, "internal error")
	assert.Contains(t, errOut, "boom")
}
