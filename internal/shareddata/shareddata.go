package shareddata

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// LinkName is the committed symbolic link, in the testdata directory at
// the root of every module whose tests read the shared data, that points
// to ../shared beside the checkout (testdata/shared -> ../../shared at
// the repository root). Dir looks through it first: go test rechecks
// the files a cached test run looked at only inside the module being
// tested, so a test that skipped for want of ../shared and had looked
// only there would stay "(cached)" once the data appears; looking
// through the link, inside the module, makes the go command notice.
const LinkName = "shared"

// Dir returns the shared directory (the one holding data/ and docs/) and
// whether it exists. It looks at $GPUTOPO_SHARED, then through the
// module's testdata/shared link (see LinkName), then for a "shared"
// directory beside each ancestor of the working directory.
//
// Go's test cache sees $GPUTOPO_SHARED's value and, through the link,
// whether ../shared/data exists and what was read from it; it does not see
// what appears under a $GPUTOPO_SHARED directory outside the module: after
// filling one, run the tests once with -count=1.
func Dir() (string, bool) {
	if d := os.Getenv("GPUTOPO_SHARED"); d != "" {
		_, err := os.Stat(filepath.Join(d, "data"))
		return d, err == nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	if root, ok := moduleRoot(wd); ok {
		link := filepath.Join(root, "testdata", LinkName)
		// Stat (not Lstat) through the link: its result, recorded by the
		// test log, changes when ../shared appears or goes.
		if st, err := os.Stat(filepath.Join(link, "data")); err == nil && st.IsDir() {
			return link, true
		}
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(filepath.Dir(d), "shared")
		if st, err := os.Stat(filepath.Join(cand, "data")); err == nil && st.IsDir() {
			return cand, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// moduleRoot returns the nearest directory at or above dir holding a
// go.mod file.
func moduleRoot(dir string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && st.Mode().IsRegular() {
			return d, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// Require returns the shared directory, or skips the test with a message
// naming what is missing.
func Require(tb testing.TB) string {
	tb.Helper()
	d, ok := Dir()
	if !ok {
		tb.Skip("shared data not found (../shared/data beside the checkout, or $GPUTOPO_SHARED): skipping the test on real hardware data")
	}
	return d
}

// Path joins elements onto the shared data directory, skipping the test
// when the shared directory is absent.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Require(tb), "data"}, elem...)...)
}

// File is one gpu-topology/v1 document.
type File struct {
	ID        string    `json:"id"`
	Schema    string    `json:"schema"`
	Vendor    string    `json:"vendor"`
	System    string    `json:"system"`
	RawFormat string    `json:"raw_format"`
	Complete  bool      `json:"complete"`
	GPUCount  int       `json:"gpu_count"`
	GPUs      []GPU     `json:"gpus"`
	NICs      []NIC     `json:"nics"`
	Links     []Link    `json:"links"`
	NICLinks  []NICLink `json:"nic_links"`
	Matrix    []string  `json:"matrix"`
}

// GPU is one entry of gpus[].
type GPU struct {
	Index       int             `json:"index"`
	Model       string          `json:"model"`
	NUMA        json.RawMessage `json:"numa"`
	CPUAffinity *string         `json:"cpu_affinity"`
	PCIBusID    string          `json:"pci_bus_id"`
	RowInSource string          `json:"row_in_source"`
	KFDNode     *int            `json:"kfd_node"`
	HiveID      string          `json:"hive_id"`
	PhysicalGPU *int            `json:"physical_gpu"`
	Partition   *int            `json:"partition"`
}

// NIC is one entry of nics[].
type NIC struct {
	Name      string  `json:"name"`
	Device    string  `json:"device"`
	SpeedMbps uint64  `json:"speed_mbps"`
	PCIBusID  *string `json:"pci_bus_id"`
}

// Link is one entry of links[].
type Link struct {
	A            int    `json:"a"`
	B            int    `json:"b"`
	Kind         string `json:"kind"`
	NVLinks      int    `json:"nvlinks"`
	XGMILinks    int    `json:"xgmi_links"`
	Weight       int    `json:"weight"`
	Hops         int    `json:"hops"`
	KFDLink      string `json:"kfd_link"`
	MaxBandwidth int    `json:"max_bandwidth_MBps"`
	Inferred     bool   `json:"inferred"`
	From         string `json:"from"`
}

// NICLink is one entry of nic_links[].
type NICLink struct {
	GPU  int    `json:"gpu"`
	NIC  string `json:"nic"`
	Kind string `json:"kind"`
}

// Topologies reads every file of data/topologies, sorted by id, skipping
// the test when the shared directory is absent.
func Topologies(tb testing.TB) []*File {
	tb.Helper()
	dir := Path(tb, "topologies")
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(names) == 0 {
		tb.Fatalf("no topology files in %s: %v", dir, err)
	}
	slices.Sort(names)
	var out []*File
	for _, name := range names {
		f, err := ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// Topology reads data/topologies/<id>.json.
func Topology(tb testing.TB, id string) *File {
	tb.Helper()
	f, err := ReadFile(Path(tb, "topologies", id+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// ReadFile reads one gpu-topology/v1 document.
func ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Schema != "gpu-topology/v1" {
		return nil, fmt.Errorf("%s: schema %q", path, f.Schema)
	}
	return &f, nil
}

// NUMAID returns the GPU's NUMA node: the number, the first of a list
// ("0,3-9,11-17" on Grace), or -1 when null.
func (g GPU) NUMAID() (int, error) {
	s := strings.Trim(string(g.NUMA), `"`)
	if s == "" || s == "null" {
		return -1, nil
	}
	head, _, _ := strings.Cut(s, ",")
	head, _, _ = strings.Cut(head, "-")
	return strconv.Atoi(head)
}

// Node converts the file into a topology node by the project's canonical
// rules, which every provider must reproduce:
//
//   - NV<n> is an NVLink of n lanes, reclassified as NVSwitch when a GPU's
//     lanes over all peers exceed its model's NVLink count;
//   - XGMI is an xGMI link with xgmi_links lanes (1 when not given) and the
//     KFD max bandwidth when given; partitions of one package (same
//     physical_gpu) link with the KFD bandwidth and no lane count;
//   - PIX/PXB/PHB/NODE/SYS map to the PCIe classes; a KFD or rocm-smi PCIE
//     pair is SYS across NUMA nodes and NODE within one;
//   - a KFD partition (a physical GPU with more than one KFD node) has as
//     Package the PCI address of its physical GPU's first partition, and as
//     Partition AMD/CPX with its index; a whole GPU has neither;
//   - KFD files' cpu_affinity is left out: the converter derived it from
//     KFD's cpu_core_id_base, which counts APIC ids, not Linux CPUs.
func (f *File) Node() (*topology.Node, error) {
	var vendor topology.Vendor
	err := vendor.UnmarshalText([]byte(f.Vendor))
	if err != nil {
		return nil, err
	}
	b := topology.NewBuilder().SetName(f.ID).SetInferNVSwitch(true)
	numa := make([]int, len(f.GPUs))
	packagePCI := map[int]string{}
	partitions := map[int]int{}
	for _, g := range f.GPUs {
		if g.PhysicalGPU != nil && g.Partition != nil {
			partitions[*g.PhysicalGPU]++
			if *g.Partition == 0 {
				packagePCI[*g.PhysicalGPU] = g.PCIBusID
			}
		}
	}
	for i, g := range f.GPUs {
		d := topology.Device{Index: g.Index, Vendor: vendor, Model: g.Model}
		if d.NUMA, err = g.NUMAID(); err != nil {
			return nil, fmt.Errorf("%s gpu %d numa: %w", f.ID, g.Index, err)
		}
		numa[i] = d.NUMA
		// KFD files derive cpu_affinity from cpu_core_id_base (APIC ids, not
		// Linux CPU numbers), so it is not a cpulist to trust.
		if g.CPUAffinity != nil && f.RawFormat != "kfd-sysfs" {
			if d.CPUs, err = topology.ParseCPUSet(*g.CPUAffinity); err != nil {
				return nil, err
			}
		}
		if g.PCIBusID != "" {
			if d.PCI, err = topology.ParsePCIAddress(g.PCIBusID); err != nil {
				return nil, err
			}
		}
		if g.PhysicalGPU != nil && g.Partition != nil && partitions[*g.PhysicalGPU] > 1 {
			d.Package = packagePCI[*g.PhysicalGPU]
			d.Partition = topology.Partitioning{Kind: topology.PartitionAMD, Enabled: true, ComputeMode: "CPX", Index: *g.Partition}
		}
		b.AddDevice(d)
	}
	for _, l := range f.Links {
		tl, err := convertLink(f, l, numa)
		if err != nil {
			return nil, fmt.Errorf("%s link %d-%d: %w", f.ID, l.A, l.B, err)
		}
		b.SetLinkPair(l.A, l.B, tl)
	}
	nicIndex := map[string]int{}
	for i, n := range f.NICs {
		nic := topology.NIC{Name: n.Name, Device: n.Device, SpeedMbps: n.SpeedMbps, NUMA: -1}
		if n.PCIBusID != nil {
			if nic.PCI, err = topology.ParsePCIAddress(*n.PCIBusID); err != nil {
				return nil, err
			}
		}
		nicIndex[n.Name] = i
		b.AddNIC(nic)
	}
	for _, nl := range f.NICLinks {
		var k topology.LinkKind
		if err := k.UnmarshalText([]byte(nl.Kind)); err != nil {
			return nil, err
		}
		i, ok := nicIndex[nl.NIC]
		if !ok {
			return nil, fmt.Errorf("%s: nic link to unknown NIC %q", f.ID, nl.NIC)
		}
		b.SetNICLink(nl.GPU, i, k)
	}
	return b.Build()
}

func convertLink(f *File, l Link, numa []int) (topology.Link, error) {
	switch {
	case strings.HasPrefix(l.Kind, "NV"):
		n, err := strconv.Atoi(strings.TrimPrefix(l.Kind, "NV"))
		if err != nil {
			return topology.Link{}, err
		}
		return topology.Link{Kind: topology.LinkNVLink, Lanes: n}, nil
	case l.Kind == "XGMI":
		out := topology.Link{Kind: topology.LinkXGMI, Lanes: max(l.XGMILinks, 1)}
		if l.MaxBandwidth > 0 {
			out.Bandwidth = float64(l.MaxBandwidth) / 1000
		}
		ga, gb := f.GPUs[l.A], f.GPUs[l.B]
		if ga.PhysicalGPU != nil && gb.PhysicalGPU != nil && *ga.PhysicalGPU == *gb.PhysicalGPU {
			out.Lanes = 0 // on-package fabric between partitions, not a physical link
		}
		return out, nil
	case l.Kind == "PCIE":
		if numa[l.A] >= 0 && numa[l.B] >= 0 && numa[l.A] != numa[l.B] {
			return topology.Link{Kind: topology.LinkSYS}, nil
		}
		return topology.Link{Kind: topology.LinkNODE}, nil
	}
	var k topology.LinkKind
	if err := k.UnmarshalText([]byte(l.Kind)); err != nil {
		return topology.Link{}, err
	}
	return topology.Link{Kind: k}, nil
}
