package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/topology"
)

// nvidiaTree writes a minimal sysfs tree with two NVIDIA H200s (no driver)
// on two root ports.
func nvidiaTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for i := range 2 {
		addr := fmt.Sprintf("0000:%02x:00.0", i+1)
		rel := filepath.Join("sys", "devices", "pci0000:00", fmt.Sprintf("0000:00:%02x.0", i+1), addr)
		files := map[string]string{
			"vendor": "0x10de\n", "device": "0x2335\n", "class": "0x030200\n", "numa_node": "-1\n",
			"modalias": "pci:v000010DEd00002335sv000010DEsd00000000bc03sc02i00\n",
		}
		for name, content := range files {
			p := filepath.Join(root, rel, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		link := filepath.Join(root, "sys", "bus", "pci", "devices", addr)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../devices/pci0000:00/"+fmt.Sprintf("0000:00:%02x.0", i+1)+"/"+addr, link); err != nil {
			t.Fatal(err)
		}
	}
	return root
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
