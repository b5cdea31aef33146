package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlaceText(t *testing.T) {
	// allocators.md §7 P1 on the reference DGX-1: free {0,2,4,5}, k=2.
	// go-gpuallocator takes the NV1 pair {4,5}; request first, the NV2 pair
	// {0,4} wins (twice the ring bandwidth), and the runner-up loses on
	// its ring class.
	code, out, errOut := runCLI(t, "place", "--machine", "dgx1-v100", "--gpus", "2", "--busy", "1,3,6-7")
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"embedded reference machine dgx1-v100", "Chosen: GPU0,GPU4", "proven optimal",
		"Policy: request first", "ring", "lookahead", "Runner-up: GPU", "why it lost: request first: weaker ring class"} {
		assert.Contains(t, out, want)
	}
	// --trade weighs everything in one mean: look-ahead keeps the NV2 pair
	// and the request gets an NV1 pair on one socket.
	code, out, errOut = runCLI(t, "place", "--machine", "dgx1-v100", "--gpus", "2", "--busy", "1,3,6-7", "--trade", "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Devices []int  `json:"devices"`
		Policy  string `json:"policy"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "trade", got.Policy)
	assert.Contains(t, [][]int{{0, 2}, {4, 5}}, got.Devices)
}

func TestPlaceJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "place", "--machine", "dgx1-v100", "--gpus", "4", "--require", "4", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Devices    []int `json:"devices"`
		NodeScore  int   `json:"nodeScore"`
		Exact      bool  `json:"exact"`
		Components []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"components"`
		RunnerUp *struct {
			Devices []int  `json:"devices"`
			Why     string `json:"why"`
		} `json:"runnerUp"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !slices.Equal(got.Devices, []int{4, 5, 6, 7}) || !got.Exact || len(got.Components) == 0 || got.NodeScore <= 0 || got.NodeScore > 100 {
		t.Fatalf("unexpected %+v", got)
	}
	if got.RunnerUp == nil || slices.Equal(got.RunnerUp.Devices, got.Devices) || got.RunnerUp.Why == "" {
		t.Fatalf("runner-up %+v", got.RunnerUp)
	}
}

// An `nvidia-smi topo -m` printout of an 8-GPU box with NV12 bridges on
// (0,2) (1,3) (4,5) (6,7) (allocators.md §7 B8; written by us).
const b8Matrix = `	GPU0	GPU1	GPU2	GPU3	GPU4	GPU5	GPU6	GPU7	CPU Affinity	NUMA Affinity
GPU0	 X 	SYS	NV12	SYS	SYS	SYS	SYS	SYS	0-31	0
GPU1	SYS	 X 	SYS	NV12	SYS	SYS	SYS	SYS	0-31	0
GPU2	NV12	SYS	 X 	SYS	SYS	SYS	SYS	SYS	0-31	0
GPU3	SYS	NV12	SYS	 X 	SYS	SYS	SYS	SYS	0-31	0
GPU4	SYS	SYS	SYS	SYS	 X 	NV12	SYS	SYS	32-63	1
GPU5	SYS	SYS	SYS	SYS	NV12	 X 	SYS	SYS	32-63	1
GPU6	SYS	SYS	SYS	SYS	SYS	SYS	 X 	NV12	32-63	1
GPU7	SYS	SYS	SYS	SYS	SYS	SYS	NV12	 X 	32-63	1
`

func TestPlaceNvidiaSMIFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topo.txt")
	if err := os.WriteFile(path, []byte(b8Matrix), 0o644); err != nil {
		t.Fatal(err)
	}
	// §7 W2: GPU 0 busy, one GPU → its stranded NVLink partner 2.
	code, out, errOut := runCLI(t, "place", "--topology", path, "--model", "NVIDIA A100-PCIE-40GB", "--gpus", "1", "--busy", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Devices []int }
	if err := json.Unmarshal([]byte(out), &got); err != nil || !slices.Equal(got.Devices, []int{2}) {
		t.Fatalf("devices %v (%v):\n%s", got.Devices, err, out)
	}
}

func TestPlaceErrors(t *testing.T) {
	// Bad input exits 2; a request that does not fit exits 1.
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--gpus", "0"}, "invalid request", 2},
		{[]string{"--gpus", "-3"}, "invalid request", 2},
		{[]string{"--gpus", "9"}, "insufficient devices", 1},
		{[]string{"--gpus", "2", "--busy", "9"}, "out of range", 2},
		{[]string{"--gpus", "2", "--busy", "3-1"}, "reversed range", 2},
		{[]string{"--gpus", "2", "--busy", "1,1"}, "listed twice", 2},
		{[]string{"--gpus", "2", "--busy", "x"}, "device index", 2},
		{[]string{"--gpus", "2", "--busy", "0", "--require", "0"}, "required device unavailable", 1},
		{[]string{"--gpus", "8", "--busy", "0", "--exclude", "1"}, "insufficient devices", 1},
		{[]string{"--gpus", "4", "--scope", "numa", "--scope-required", "--busy", "0,4"}, "no device set meets the constraints", 1},
		{[]string{"--gpus", "4", "--scope", "numa", "--scope-mode", "required", "--busy", "0,4"}, "no device set meets the constraints", 1},
		// the default mode is required, as in Go (scoring.Mode's zero value) and gang files
		{[]string{"--gpus", "4", "--scope", "numa", "--busy", "0,4"}, "no device set meets the constraints", 1},
	} {
		args := append([]string{"place", "--machine", "dgx1-v100"}, c.args...)
		code, _, errOut := runCLI(t, args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if code, _, _ := runCLI(t, "place", "--gpus"); code != 2 {
		t.Errorf("missing flag value: exit %d, want 2", code)
	}
	// Bad enum values are usage errors naming the accepted values.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "2", "--scope", "rack"}, "unknown scope"},
		{[]string{"--gpus", "2", "--scope", "numa", "--scope-mode", "sometimes"}, "want required or preferred"},
	} {
		args := append([]string{"place", "--machine", "dgx1-v100"}, c.args...)
		code, _, errOut := runCLI(t, args...)
		assert.Equal(t, 2, code, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
}

// --scope-mode preferred turns the scope into a score term: the request
// that a required NUMA scope cannot meet succeeds across NUMA nodes.
func TestPlaceScopePreferred(t *testing.T) {
	code, out, errOut := runCLI(t, "place", "--machine", "dgx1-v100", "--gpus", "4", "--scope", "numa", "--scope-mode", "preferred", "--busy", "0,4", "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Devices    []int `json:"devices"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Len(t, got.Devices, 4)
	assert.NotContains(t, got.Devices, 0)
	assert.NotContains(t, got.Devices, 4)
	var names []string
	for _, c := range got.Components {
		names = append(names, c.Name)
	}
	assert.Contains(t, names, "scope", "a preferred scope is a score component")
}

func TestParseDeviceList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{{"", nil}, {" ", nil}, {"3", []int{3}}, {"0,2-4", []int{0, 2, 3, 4}}, {" 1 , 5-5 ", []int{1, 5}}} {
		got, err := parseDeviceList(c.in, 8)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{",", "1,", "-1", "1-", "a", "2-1", "8", "0-8", "1,1", "0-2,2", "+1", "1--2", "99999999999"} {
		if got, err := parseDeviceList(bad, 8); err == nil {
			t.Errorf("%q parsed as %v", bad, got)
		}
	}
}

func FuzzParseDeviceList(f *testing.F) {
	for _, s := range []string{"", "0", "0,2-4", "1-", "-", "7,6,5", "0-7", " 3 ", "1,,2"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 300
		if n < 0 {
			n = -n
		}
		got, err := parseDeviceList(s, n)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, i := range got {
			if i < 0 || i >= n || seen[i] {
				t.Fatalf("%q (n=%d) gave %v", s, n, got)
			}
			seen[i] = true
		}
		// Printing the list back parses to the same devices.
		parts := make([]string, len(got))
		for i, d := range got {
			parts[i] = strconv.Itoa(d)
		}
		again, err := parseDeviceList(strings.Join(parts, ","), n)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("round trip of %v: %v %v", got, again, err)
		}
	})
}
