package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// nvidiaTree writes a minimal sysfs tree with two NVIDIA H200s (no driver)
// on two root ports, built with the exported fakes of provider/sysfstest
// and written to a directory (the sysfs provider reads real paths).
func nvidiaTree(t *testing.T) string {
	t.Helper()
	tr := sysfstest.New()
	for i := range 2 {
		f := sysfstest.PCIFunc{Path: []string{"pci0000:00", fmt.Sprintf("0000:00:%02x.0", i+1), fmt.Sprintf("0000:%02x:00.0", i+1)},
			Vendor: 0x10de, Device: 0x2335, Class: 0x030200, NUMA: -1}
		require.NoError(t, tr.AddPCI(f))
	}
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	return root
}

// TestDetectAMDTree: --root is the filesystem root (the directory holding
// sys/) for every provider; a generated MI300X node under it is answered by
// the amd provider.
func TestDetectAMDTree(t *testing.T) {
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI300X8("SPX", "NPS1")))
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	code, out, errOut := runCLI(t, "detect", "--root", root)
	require.Equal(t, 0, code, "stderr %q", errOut)
	require.Contains(t, out, "amd: detected")
	require.Contains(t, out, "answered by the amd provider")
	require.Contains(t, out, "8 devices (8× AMD Instinct MI300X)")
}

func TestDetectSysfsTree(t *testing.T) {
	code, out, errOut := runCLI(t, "detect", "--root", nvidiaTree(t))
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"amd: not detected", "sysfs: detected", "note: PCIe only: no fabric information",
		"NVIDIA GPUs seen without NVML", "answered by the sysfs provider", "2 devices (2× NVIDIA H200)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDetectJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "detect", "--root", nvidiaTree(t), "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	n, err := topology.ParseJSON([]byte(out))
	if err != nil || n.Len() != 2 || n.Link(0, 1).Kind != topology.LinkPHB {
		t.Fatalf("%v %v", n, err)
	}
	if !strings.Contains(errOut, "sysfs: detected") {
		t.Errorf("report not on stderr: %q", errOut)
	}
}

func TestDetectNothing(t *testing.T) {
	code, out, errOut := runCLI(t, "detect", "--root", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no provider detected an accelerator") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"amd: not detected: ", "sysfs: not detected: ", "no PCI bus"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runCLI(t, "detect", "--format", "yaml"); code != 2 {
		t.Errorf("bad format: exit %d", code)
	}
}

// TestDetectKFDCapture reads the real MI308X CPX capture.
func TestDetectKFDCapture(t *testing.T) {
	dir := shareddata.Path(t, "kfd", "mi308x-cpx", "topology")
	code, out, errOut := runCLI(t, "detect", "--kfd", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"amd: detected", "note: no PCI sysfs entry", "32 devices (32× AMD Instinct MI308X)", "CPX"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
