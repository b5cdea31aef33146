package fakesys

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Tree is a fake filesystem root: the directory that holds sys/ and proc/.
type Tree struct {
	Root string
	// bridges records the bridges written so far; dirs the directories made.
	bridges, dirs map[string]bool
}

// New returns a tree rooted at root (normally t.TempDir()).
func New(root string) *Tree {
	return &Tree{Root: root, bridges: map[string]bool{}, dirs: map[string]bool{}}
}

// Sys returns the path of the fake /sys.
func (t *Tree) Sys() string { return filepath.Join(t.Root, "sys") }

// File writes content to root/rel, creating directories.
func (t *Tree) File(rel, content string) error {
	p := filepath.Join(t.Root, rel)
	if err := t.mkdir(filepath.Dir(p)); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func (t *Tree) mkdir(dir string) error {
	if t.dirs[dir] {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.dirs[dir] = true
	return nil
}

// Link creates the symlink root/rel pointing at target (relative to the
// link's directory, as sysfs does).
func (t *Tree) Link(rel, target string) error {
	p := filepath.Join(t.Root, rel)
	if err := t.mkdir(filepath.Dir(p)); err != nil {
		return err
	}
	return os.Symlink(target, p)
}

// Dir creates root/rel.
func (t *Tree) Dir(rel string) error { return t.mkdir(filepath.Join(t.Root, rel)) }

// PCIFunc describes one PCI function.
type PCIFunc struct {
	// Path is the function's place: the host bridge ("pci0000:00"), the
	// bridges from the root port down, and last the function's address.
	Path   []string
	Vendor uint16
	Device uint16
	Class  uint32 // 24-bit class code, 0x030200 for a 3D controller
	// NUMA is the numa_node value (-1 for none).
	NUMA int
	// CPUs is local_cpulist ("" writes none).
	CPUs string
	// Driver is the bound driver ("" for none).
	Driver string
	// Attrs are extra files in the function's directory (name → content).
	Attrs map[string]string
	// Netdev and RDMA create net/<name> and infiniband/<name> entries.
	Netdev, RDMA string
	// SpeedMbps is written to net/<Netdev>/speed when non-zero.
	SpeedMbps int
}

// Address returns the function's address (the last path element).
func (f PCIFunc) Address() string { return f.Path[len(f.Path)-1] }

// AddPCI writes the function under sys/devices, links it from
// sys/bus/pci/devices, and writes any bridge of its path not written yet
// (class 0x060400, same NUMA node).
func (t *Tree) AddPCI(f PCIFunc) error {
	if len(f.Path) < 2 || !strings.HasPrefix(f.Path[0], "pci") {
		return fmt.Errorf("fakesys: PCI path %v must start with a host bridge and end with the function", f.Path)
	}
	for i := 1; i < len(f.Path)-1; i++ {
		key := strings.Join(f.Path[:i+1], "/")
		if t.bridges[key] {
			continue
		}
		t.bridges[key] = true
		if err := t.writePCI(PCIFunc{Path: f.Path[:i+1], Vendor: 0x1000, Device: 0xc030, Class: 0x060400, NUMA: f.NUMA, Driver: "pcieport"}); err != nil {
			return err
		}
	}
	return t.writePCI(f)
}

func (t *Tree) writePCI(f PCIFunc) error {
	rel := filepath.Join(append([]string{"sys", "devices"}, f.Path...)...)
	addr := f.Address()
	files := map[string]string{
		"vendor":    fmt.Sprintf("0x%04x\n", f.Vendor),
		"device":    fmt.Sprintf("0x%04x\n", f.Device),
		"class":     fmt.Sprintf("0x%06x\n", f.Class),
		"numa_node": fmt.Sprintf("%d\n", f.NUMA),
		"revision":  "0x00\n",
		"modalias": fmt.Sprintf("pci:v0000%04Xd0000%04Xsv0000%04Xsd0000%04Xbc%02Xsc%02Xi%02X\n",
			f.Vendor, f.Device, f.Vendor, 0, f.Class>>16, (f.Class>>8)&0xff, f.Class&0xff),
	}
	if f.CPUs != "" {
		files["local_cpulist"] = f.CPUs + "\n"
	}
	for k, v := range f.Attrs {
		files[k] = v
	}
	for name, content := range files {
		if err := t.File(filepath.Join(rel, name), content); err != nil {
			return err
		}
	}
	up := strings.Repeat("../", len(f.Path)+1) // from sys/devices/<path...> to sys/
	if f.Driver != "" {
		if err := t.Dir(filepath.Join("sys", "bus", "pci", "drivers", f.Driver)); err != nil {
			return err
		}
		if err := t.Link(filepath.Join(rel, "driver"), up+"bus/pci/drivers/"+f.Driver); err != nil {
			return err
		}
	}
	if f.Netdev != "" {
		if err := t.File(filepath.Join(rel, "net", f.Netdev, "speed"), fmt.Sprintf("%d\n", f.SpeedMbps)); err != nil {
			return err
		}
	}
	if f.RDMA != "" {
		if err := t.Dir(filepath.Join(rel, "infiniband", f.RDMA)); err != nil {
			return err
		}
	}
	return t.Link(filepath.Join("sys", "bus", "pci", "devices", addr), "../../../devices/"+strings.Join(f.Path, "/"))
}

// NUMANode describes one NUMA node.
type NUMANode struct {
	// CPUs lists the node's logical CPUs.
	CPUs []int
	// Distances is the node's SLIT row.
	Distances []int
	// MemKiB is MemTotal.
	MemKiB int
}

// AddNUMA writes sys/devices/system/node/node<i> for every node in the
// layout ghw reads (cpulist, distance, meminfo, cpu<N>/topology/core_id,
// hugepages), plus proc/meminfo.
func (t *Tree) AddNUMA(nodes []NUMANode) error {
	total := 0
	for i, n := range nodes {
		dir := filepath.Join("sys", "devices", "system", "node", fmt.Sprintf("node%d", i))
		var dist []string
		for _, d := range n.Distances {
			dist = append(dist, fmt.Sprint(d))
		}
		if err := t.File(filepath.Join(dir, "distance"), strings.Join(dist, " ")+"\n"); err != nil {
			return err
		}
		if err := t.File(filepath.Join(dir, "cpulist"), CPUList(n.CPUs)+"\n"); err != nil {
			return err
		}
		if err := t.File(filepath.Join(dir, "meminfo"), fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n", i, n.MemKiB, i, n.MemKiB/2)); err != nil {
			return err
		}
		if err := t.Dir(filepath.Join(dir, "hugepages")); err != nil {
			return err
		}
		for _, c := range n.CPUs {
			if err := t.File(filepath.Join(dir, fmt.Sprintf("cpu%d", c), "topology", "core_id"), fmt.Sprintf("%d\n", c)); err != nil {
				return err
			}
		}
		total += n.MemKiB
	}
	return t.File(filepath.Join("proc", "meminfo"), fmt.Sprintf("MemTotal:       %d kB\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n", total))
}

// CPUList formats CPU ids in Linux cpulist syntax.
func CPUList(cpus []int) string {
	c := slices.Sorted(slices.Values(cpus))
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Range returns the ints lo..hi inclusive.
func Range(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}
