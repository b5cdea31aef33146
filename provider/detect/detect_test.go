package detect_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/provider/detect"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/sysfs"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

var (
	_ provider.TopologyProvider = (*amd.Provider)(nil)
	_ provider.Annotator        = (*amd.Provider)(nil)
	_ provider.TopologyProvider = (*sysfs.Provider)(nil)
	_ provider.Annotator        = (*sysfs.Provider)(nil)
	_ provider.TopologyProvider = (*nvidia.Provider)(nil)
)

// fake is a provider with a fixed answer that counts its calls.
type fake struct {
	name  string
	node  *topology.Node
	err   error
	calls *int
}

func (f fake) Name() string { return f.name }
func (f fake) Discover(ctx context.Context) (*topology.Node, error) {
	if f.calls != nil {
		*f.calls++
	}
	return f.node, f.err
}

func node(t *testing.T) *topology.Node {
	t.Helper()
	n, err := catalog.Get("mi300x-8gpu")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDetectOrder(t *testing.T) {
	n := node(t)
	var later int
	got, rep, err := detect.Detect(context.Background(),
		fake{name: "a", err: fmt.Errorf("%w: no driver", provider.ErrNotDetected)},
		fake{name: "b", node: n},
		fake{name: "c", node: n, calls: &later})
	if err != nil || got != n || rep.Chosen != "b" || later != 0 {
		t.Fatalf("got %v, chosen %q, err %v, later calls %d", got, rep.Chosen, err, later)
	}
	if len(rep.Attempts) != 2 || !rep.Attempts[0].NotDetected() || rep.Attempts[1].Err != nil || rep.Degraded() {
		t.Errorf("report %+v", rep)
	}
	if s := rep.String(); s != "a: not detected: provider: no devices detected: no driver\nb: detected\n" {
		t.Errorf("String = %q", s)
	}
}

// TestDetectSubpackageSentinels: each hardware subpackage's "nothing here"
// error counts as ErrNotDetected in the report, with its message intact;
// other errors are failures.
func TestDetectSubpackageSentinels(t *testing.T) {
	errs := []error{
		fmt.Errorf("nvidia: init: %w", nvidia.ErrNoNVML),
		fmt.Errorf("nvidia: %w", nvidia.ErrNoDevices),
		fmt.Errorf("%w: no KFD", amd.ErrNotDetected),
		fmt.Errorf("%w: no accelerator", sysfs.ErrNotDetected),
	}
	var ps []provider.TopologyProvider
	for i, e := range errs {
		ps = append(ps, fake{name: fmt.Sprint(i), err: e})
	}
	ps = append(ps, fake{name: "broken", err: fmt.Errorf("%w: garbage", amd.ErrParse)})
	_, rep, err := detect.Detect(context.Background(), ps...)
	if !errors.Is(err, provider.ErrNotDetected) || !errors.Is(err, amd.ErrParse) {
		t.Fatalf("err = %v", err)
	}
	for i, a := range rep.Attempts[:4] {
		if !a.NotDetected() || a.Failed() || !errors.Is(a.Err, errs[i]) || a.Err.Error() != errs[i].Error() {
			t.Errorf("attempt %d: %v (not detected %v)", i, a.Err, a.NotDetected())
		}
	}
	if last := rep.Attempts[4]; !last.Failed() || !strings.Contains(rep.String(), "broken: failed: ") {
		t.Errorf("broken attempt %+v, report %q", last, rep.String())
	}
	if rep.Chosen != "" || rep.Degraded() {
		t.Errorf("chosen %q degraded %v", rep.Chosen, rep.Degraded())
	}
}

func TestDetectNilNodeAndCancel(t *testing.T) {
	_, rep, err := detect.Detect(context.Background(), fake{name: "nil"})
	if !errors.Is(err, provider.ErrNotDetected) || !rep.Attempts[0].NotDetected() {
		t.Errorf("nil node: %v %+v", err, rep)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls int
	if _, _, err := detect.Detect(ctx, fake{name: "x", node: node(t), calls: &calls}); !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("canceled: %v, %d calls", err, calls)
	}
}

func TestDefaultProviders(t *testing.T) {
	var names []string
	for _, p := range detect.DefaultProviders() {
		names = append(names, p.Name())
	}
	if strings.Join(names, ",") != "nvidia,amd,sysfs" {
		t.Errorf("default providers %v", names)
	}
}

// written writes tr to a fresh directory (provider/sysfs reads real paths
// only) and returns it.
func written(t *testing.T, tr *sysfstest.Tree) string {
	t.Helper()
	root := t.TempDir()
	if err := tr.WriteDir(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// hardware returns the vendor and fallback providers reading the tree.
func hardware(root string) []provider.TopologyProvider {
	return []provider.TopologyProvider{
		fake{name: "nvidia", err: fmt.Errorf("nvidia: init: %w", nvidia.ErrNoNVML)},
		amd.New(amd.WithRoot(root), amd.WithNodeName("n")),
		sysfs.New(sysfs.WithRoot(root), sysfs.WithNodeName("n")),
	}
}

// TestDetectGeneratedTrees runs the AMD and sysfs providers on generated
// machines: an MI300X node is answered by amd; an NVIDIA node without a
// driver by sysfs, with the no-fabric note; an empty machine by nobody.
func TestDetectGeneratedTrees(t *testing.T) {
	t.Run("MI300X", func(t *testing.T) {
		tr := sysfstest.New()
		if err := tr.AddAMD(sysfstest.MI300X8("SPX", "NPS1")); err != nil {
			t.Fatal(err)
		}
		n, rep, err := detect.Detect(context.Background(), hardware(written(t, tr))...)
		if err != nil || rep.Chosen != "amd" || n.Len() != 8 || len(rep.Attempts[1].Notes) != 0 {
			t.Fatalf("%v %v\n%s", n, err, rep)
		}
	})
	t.Run("NVIDIA without driver", func(t *testing.T) {
		tr := sysfstest.New()
		for i := range 2 {
			if err := tr.AddPCI(sysfstest.PCIFunc{Path: []string{"pci0000:00", fmt.Sprintf("0000:00:%02x.0", i+1), fmt.Sprintf("0000:%02x:00.0", i+1)},
				Vendor: 0x10de, Device: 0x2335, Class: 0x030200, NUMA: -1}); err != nil {
				t.Fatal(err)
			}
		}
		root := written(t, tr)
		n, rep, err := detect.Detect(context.Background(), hardware(root)...)
		if err != nil || rep.Chosen != "sysfs" || n.Len() != 2 || rep.Degraded() {
			t.Fatalf("%v %v\n%s", n, err, rep)
		}
		want := "nvidia: not detected: nvidia: init: nvidia: NVML not available\n" +
			"amd: not detected: provider: no devices detected: no KFD topology at " + filepath.Join(root, "sys/class/kfd/kfd/topology") +
			" (amdgpu driver not loaded?): stat " + filepath.Join(root, "sys/class/kfd/kfd/topology") + ": no such file or directory\n" +
			"sysfs: detected\n  note: " + sysfs.NoFabric + "\n" +
			"  note: NVIDIA GPUs seen without NVML: NVLink/NVSwitch links, MIG state, UUIDs and memory are unknown\n"
		if got := rep.String(); got != want {
			t.Errorf("report:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("no accelerator", func(t *testing.T) {
		tr := sysfstest.New()
		if err := tr.AddPCI(sysfstest.PCIFunc{Path: []string{"pci0000:00", "0000:00:1c.0", "0000:02:00.0"}, Vendor: 0x1a03, Device: 0x2000, Class: 0x030000, NUMA: -1}); err != nil {
			t.Fatal(err)
		}
		_, rep, err := detect.Detect(context.Background(), hardware(written(t, tr))...)
		if !errors.Is(err, provider.ErrNotDetected) || rep.Chosen != "" {
			t.Fatalf("err %v, chosen %q", err, rep.Chosen)
		}
		for _, a := range rep.Attempts {
			if !a.NotDetected() {
				t.Errorf("%s: %v", a.Provider, a.Err)
			}
		}
	})
}

// TestDetectDegraded: the AMD provider fails for a real reason (a garbage
// partition file) and sysfs answers with the same GPUs over PCIe only; the
// report shows the failure, the fallback's notes and a warning, so the
// fallback does not hide the vendor provider's problem.
func TestDetectDegraded(t *testing.T) {
	tr := sysfstest.New()
	m := sysfstest.MI300X8("SPX", "NPS1")
	m.GPUs, m.XGMI = m.GPUs[:2], map[[2]int]int{{0, 1}: 1}
	if err := tr.AddAMD(m); err != nil {
		t.Fatal(err)
	}
	if err := tr.File(sysfstest.PCIDevices+"/0000:23:00.0/current_compute_partition", "BOGUS\n"); err != nil {
		t.Fatal(err)
	}
	n, rep, err := detect.Detect(context.Background(), hardware(written(t, tr))...)
	if err != nil || rep.Chosen != "sysfs" || n.Len() != 2 || !rep.Degraded() {
		t.Fatalf("%v %v\n%s", n, err, rep)
	}
	if !rep.Attempts[1].Failed() || !errors.Is(rep.Attempts[1].Err, amd.ErrParse) {
		t.Errorf("amd attempt: %v", rep.Attempts[1].Err)
	}
	s := rep.String()
	for _, want := range []string{"amd: failed: ", "current_compute_partition", "sysfs: detected", "AMD GPUs seen without the KFD topology",
		"warning: sysfs answered because amd failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if l := n.Link(0, 1); l.Kind != topology.LinkNODE {
		t.Errorf("fallback link 0-1 = %v, want NODE (no xGMI visible)", l)
	}
}

// TestDetectSharedKFD runs detection over the real KFD captures.
func TestDetectSharedKFD(t *testing.T) {
	for _, dump := range [][]string{{"kfd", "mi210-8gpu-2hives"}, {"kfd", "mi308x-cpx", "topology"}} {
		dir := shareddata.Path(t, dump...)
		n, rep, err := detect.Detect(context.Background(),
			fake{name: "nvidia", err: nvidia.ErrNoNVML},
			amd.New(amd.WithRoot(t.TempDir()), amd.WithKFDTopology(dir)),
			sysfs.New(sysfs.WithRoot(t.TempDir())))
		if err != nil || rep.Chosen != "amd" || n.Len() == 0 {
			t.Errorf("%s: %v %v\n%s", dir, n, err, rep)
		}
		// The captures have no PCI sysfs: the report says NUMA was derived.
		if got := rep.Attempts[1].Notes; len(got) == 0 || !strings.Contains(got[0], "no PCI sysfs entry") {
			t.Errorf("notes %q", got)
		}
	}
}

// ExampleDetect shows the report when a vendor provider finds nothing and
// the next one answers.
func ExampleDetect() {
	n, _ := catalog.Get("mi250x-8gcd")
	_, rep, err := detect.Detect(context.Background(),
		fake{name: "nvidia", err: fmt.Errorf("nvidia: init: %w", nvidia.ErrNoNVML)},
		provider.Static("static", n))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(rep)
	fmt.Println("chosen:", rep.Chosen, "degraded:", rep.Degraded())
	// Output:
	// nvidia: not detected: nvidia: init: nvidia: NVML not available
	// static: detected
	// chosen: static degraded: false
}
