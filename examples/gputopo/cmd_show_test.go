package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/topology"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The main job: with no arguments it discovers this machine or, with no
// GPU, says so and shows the default reference machine.
func TestShowDefault(t *testing.T) {
	code, out, errOut := runCLI(t, "show")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "discovered on this machine") && !strings.Contains(out, "no GPU detected on this machine") {
		t.Errorf("output does not say where the topology came from:\n%s", out)
	}
	for _, want := range []string{"Links:", "Estimated bandwidth", "Fabric islands"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestShowMachine(t *testing.T) {
	code, out, errOut := runCLI(t, "show", "--machine", "dgx1-v100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"embedded reference machine dgx1-v100", "Tesla V100-SXM2-32GB", "NV2", "PIX", "island 0: {0,1,2,3,4,5,6,7}", "mlx5_0 (PIX)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestShowFormatsAndFiles(t *testing.T) {
	code, js, _ := runCLI(t, "show", "--machine", "mi250x-8gcd", "--json")
	if code != 0 {
		t.Fatal("json failed")
	}
	n, err := topology.ParseJSON([]byte(js))
	if err != nil || n.Len() != 8 {
		t.Fatalf("json output does not parse: %v", err)
	}
	path := filepath.Join(t.TempDir(), "node.json")
	os.WriteFile(path, []byte(js), 0o644)
	code, dot, _ := runCLI(t, "show", "--topology", path, "--dot")
	if code != 0 || !strings.HasPrefix(dot, `graph "mi250x-8gcd"`) || !strings.Contains(dot, "XGMIx4") {
		t.Errorf("dot from file: %d\n%s", code, dot)
	}
	smi := filepath.Join(t.TempDir(), "node.txt")
	os.WriteFile(smi, []byte("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV2\t X \n"), 0o644)
	code, _, errOut := runCLI(t, "show", "--topology", smi)
	if code != 2 || !strings.Contains(errOut, "asymmetric") {
		t.Errorf("asymmetric file: exit %d, %s", code, errOut)
	}
	code, out, _ := runCLI(t, "show", "--topology", smi, "--lenient")
	if code != 0 || !strings.Contains(out, "kept the weaker NV2") {
		t.Errorf("lenient: exit %d\n%s", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	if code, _, errOut := runCLI(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "show", "--no-such-flag"); code != 2 {
		t.Errorf("bad flag: %d", code)
	}
	if code, _, errOut := runCLI(t, "show", "--machine", "nope"); code != 2 || !strings.Contains(errOut, "unknown machine") {
		t.Errorf("unknown machine: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "show", "--machine", "dgx-h100", "--topology", "x"); code != 2 || !strings.Contains(errOut, "not both") {
		t.Errorf("both sources: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "show", "--format", "yaml", "--machine", "dgx-h100"); code != 2 || !strings.Contains(errOut, "unknown --format") {
		t.Errorf("bad format: %d %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "help"); code != 0 || !strings.Contains(out, "machines") {
		t.Errorf("help: %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "machines"); code != 0 || !strings.Contains(out, "gb200-nvl72-tray") {
		t.Errorf("machines: %d %s", code, out)
	}
}

// A hostile topology file (3,000 devices and no links in 35 KB, which once
// made the builder allocate gigabytes) is refused with an error naming the
// limit, in either file form, strict or lenient.
func TestShowHostileTopologyFile(t *testing.T) {
	dir := t.TempDir()
	var js strings.Builder
	js.WriteString(`{"schema":"gputopo/v1","devices":[`)
	for i := 0; i < 3000; i++ {
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, `{"index":%d}`, i)
	}
	js.WriteString(`],"links":[]}`)
	hostileJSON := filepath.Join(dir, "hostile.json")
	require.NoError(t, os.WriteFile(hostileJSON, []byte(js.String()), 0o644))
	hostileSMI := filepath.Join(dir, "hostile.txt")
	require.NoError(t, os.WriteFile(hostileSMI, []byte("GPU0 X"+strings.Repeat(" NV1", 4999)+"\n"), 0o644))
	for _, file := range []string{hostileJSON, hostileSMI} {
		for _, extra := range [][]string{nil, {"--lenient"}} {
			code, out, errOut := runCLI(t, append([]string{"show", "--topology", file}, extra...)...)
			assert.Equal(t, 2, code, "exit code for %s %v", file, extra)
			assert.Empty(t, out)
			assert.Contains(t, errOut, "exceeds a size limit")
			assert.Regexp(t, `topology(\.Max| limit max)`, errOut)
			assert.Less(t, len(errOut), 1000, "the error must be one short message:\n%s", errOut)
		}
	}
}

// A file larger than any parser reads is refused before it is read.
func TestShowTopologyFileTooBig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(topology.MaxJSONBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	code, _, errOut := runCLI(t, "show", "--topology", path)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "topology.MaxJSONBytes")
}
