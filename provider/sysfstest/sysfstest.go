package sysfstest

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing/fstest"
)

// Names of the tree: fs.FS names, relative to the filesystem root "/".
const (
	// Sys is /sys.
	Sys = "sys"
	// KFDTopology is /sys/class/kfd/kfd/topology.
	KFDTopology = "sys/class/kfd/kfd/topology"
	// PCIDevices is /sys/bus/pci/devices.
	PCIDevices = "sys/bus/pci/devices"
)

// Tree is a fake filesystem root (the directory that holds sys/ and proc/),
// built in memory. Its names are fs.FS names: unrooted and slash-separated
// ("sys/class/kfd/kfd/topology"). [Tree.FS] serves it to a provider's
// WithFS option; [Tree.WriteDir] writes it to a real directory for readers
// that need one (ghw, behind provider/sysfs).
//
// Every directory has an entry of its own, as on a real filesystem: it
// stays when the files below it are removed, and fstest.MapFS finds it
// without scanning every name.
//
// A Tree is not safe for concurrent use while it is being changed.
type Tree struct {
	fs fstest.MapFS
	// bridges records the bridges written so far.
	bridges map[string]bool
	// parents holds every name that was ever a directory above an entry
	// (some may be gone since), so that replacing a plain file needs no scan.
	parents map[string]bool
}

// New returns an empty tree.
func New() *Tree {
	return &Tree{fs: fstest.MapFS{}, bridges: map[string]bool{}, parents: map[string]bool{}}
}

// FS returns the tree as an fs.FS (with symlinks: it implements
// fs.ReadLinkFS). It is the tree itself, not a copy: later changes to the
// tree show through, and tests may edit the map directly (a hostile entry
// such as &fstest.MapFile{Mode: fs.ModeNamedPipe}).
func (t *Tree) FS() fstest.MapFS { return t.fs }

// maxLinks bounds the symlinks followed while resolving a name.
const maxLinks = 40

// resolve follows the symlinks of name's directories (not of its last
// element), as a write through a real filesystem would: a file written
// under sys/bus/pci/devices/<address>/ lands in the function's directory
// under sys/devices.
func (t *Tree) resolve(name string) (string, error) {
	if !fs.ValidPath(name) || name == "." {
		return "", fmt.Errorf("sysfstest: %q is not a valid fs.FS name", name)
	}
	elems := strings.Split(name, "/")
	done := ""
	for links := 0; len(elems) > 1; {
		next := path.Join(done, elems[0])
		f, ok := t.fs[next]
		if !ok || f.Mode&fs.ModeSymlink == 0 {
			done, elems = next, elems[1:]
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("sysfstest: %s: too many levels of symbolic links", name)
		}
		target := path.Join(path.Dir(next), string(f.Data))
		if target == "." || strings.HasPrefix(target, "../") || target == ".." || path.IsAbs(string(f.Data)) {
			return "", fmt.Errorf("sysfstest: %s: symlink %s points outside the tree", name, next)
		}
		done, elems = "", append(strings.Split(target, "/"), elems[1:]...)
	}
	return path.Join(done, elems[0]), nil
}

// File writes content to the file name, replacing whatever was there
// (directories on the way are implied).
func (t *Tree) File(name, content string) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	return t.put(p, &fstest.MapFile{Data: []byte(content), Mode: 0o644})
}

// Link creates the symlink name pointing at target (relative to the link's
// directory, as sysfs does).
func (t *Tree) Link(name, target string) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	return t.put(p, &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777})
}

// Dir creates the directory name (an empty directory stays listed).
func (t *Tree) Dir(name string) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	if f, ok := t.fs[p]; ok && f.Mode.IsDir() {
		return nil
	}
	return t.put(p, &fstest.MapFile{Mode: fs.ModeDir | 0o755})
}

// ReadFile returns the content of the file name (through symlinks of its
// directories), for tests that edit a generated file.
func (t *Tree) ReadFile(name string) (string, error) {
	p, err := t.resolve(name)
	if err != nil {
		return "", err
	}
	f, ok := t.fs[p]
	if !ok || !f.Mode.IsRegular() {
		return "", fmt.Errorf("sysfstest: %s: no such regular file", name)
	}
	return string(f.Data), nil
}

// Remove removes name and everything below it; a name that does not exist
// is no error.
func (t *Tree) Remove(name string) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	delete(t.fs, p)
	t.removeBelow(p)
	return nil
}

// Set puts f at name (through symlinks of its directories), replacing
// whatever was there: a hostile entry for a test, such as
// &fstest.MapFile{Mode: fs.ModeNamedPipe}.
func (t *Tree) Set(name string, f *fstest.MapFile) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	return t.put(p, f)
}

// put stores f at the resolved name p, replacing whatever was there, and
// gives every directory above it an explicit entry: testing/fstest.MapFS
// finds an explicit entry with one map lookup, an implied directory only by
// scanning every name (which made reading a large tree quadratic).
func (t *Tree) put(p string, f *fstest.MapFile) error {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if e, ok := t.fs[d]; ok && !e.Mode.IsDir() {
			return fmt.Errorf("sysfstest: %s: %s is not a directory", p, d)
		}
	}
	t.removeBelow(p)
	t.fs[p] = f
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		t.parents[d] = true
		if _, ok := t.fs[d]; !ok {
			t.fs[d] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		}
	}
	return nil
}

func (t *Tree) removeBelow(p string) {
	if !t.parents[p] {
		return
	}
	delete(t.parents, p)
	prefix := p + "/"
	for k := range t.fs {
		if strings.HasPrefix(k, prefix) {
			delete(t.fs, k)
		}
	}
}

// Restore makes name, and everything below it, under the real directory
// root what the tree holds again (written there by [Tree.WriteDir]), after
// a test put something hostile in its place: one tree written once serves
// many damage cases. Symlinks of name's directories are resolved as in the
// tree; a name the tree does not hold is removed.
func (t *Tree) Restore(root, name string) error {
	p, err := t.resolve(name)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(p))); err != nil {
		return err
	}
	sub := &Tree{fs: fstest.MapFS{}}
	for k, f := range t.fs {
		if k == p || strings.HasPrefix(k, p+"/") {
			sub.fs[k] = f
		}
	}
	return sub.WriteDir(root)
}

// WriteDir writes the tree under the real directory root (normally
// t.TempDir()): regular files, directories and symlinks. An entry of any
// other kind (a FIFO set by a test) is an error: make those with the
// operating system's calls.
func (t *Tree) WriteDir(root string) error {
	names := slices.Sorted(maps.Keys(t.fs))
	made := map[string]bool{}
	mkdir := func(dir string) error {
		if made[dir] {
			return nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		made[dir] = true
		return nil
	}
	for _, name := range names {
		f := t.fs[name]
		p := filepath.Join(root, filepath.FromSlash(name))
		switch {
		case f.Mode.IsDir():
			if err := mkdir(p); err != nil {
				return err
			}
		case f.Mode&fs.ModeSymlink != 0:
			if err := mkdir(filepath.Dir(p)); err != nil {
				return err
			}
			if err := os.Symlink(string(f.Data), p); err != nil {
				return err
			}
		case f.Mode.IsRegular():
			if err := mkdir(filepath.Dir(p)); err != nil {
				return err
			}
			perm := f.Mode.Perm()
			if perm == 0 {
				perm = 0o644
			}
			if err := os.WriteFile(p, f.Data, perm); err != nil {
				return err
			}
		default:
			return fmt.Errorf("sysfstest: %s: cannot write a %v entry to a directory", name, f.Mode.Type())
		}
	}
	return nil
}

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
		return fmt.Errorf("sysfstest: PCI path %v must start with a host bridge and end with the function", f.Path)
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
	rel := path.Join(append([]string{"sys", "devices"}, f.Path...)...)
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
		if err := t.File(path.Join(rel, name), content); err != nil {
			return err
		}
	}
	up := strings.Repeat("../", len(f.Path)+1) // from sys/devices/<path...> to sys/
	if f.Driver != "" {
		if err := t.Dir(path.Join("sys", "bus", "pci", "drivers", f.Driver)); err != nil {
			return err
		}
		if err := t.Link(path.Join(rel, "driver"), up+"bus/pci/drivers/"+f.Driver); err != nil {
			return err
		}
	}
	if f.Netdev != "" {
		if err := t.File(path.Join(rel, "net", f.Netdev, "speed"), fmt.Sprintf("%d\n", f.SpeedMbps)); err != nil {
			return err
		}
	}
	if f.RDMA != "" {
		if err := t.Dir(path.Join(rel, "infiniband", f.RDMA)); err != nil {
			return err
		}
	}
	return t.Link(path.Join("sys", "bus", "pci", "devices", addr), "../../../devices/"+strings.Join(f.Path, "/"))
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
		dir := path.Join("sys", "devices", "system", "node", fmt.Sprintf("node%d", i))
		var dist []string
		for _, d := range n.Distances {
			dist = append(dist, fmt.Sprint(d))
		}
		if err := t.File(path.Join(dir, "distance"), strings.Join(dist, " ")+"\n"); err != nil {
			return err
		}
		if err := t.File(path.Join(dir, "cpulist"), CPUList(n.CPUs)+"\n"); err != nil {
			return err
		}
		if err := t.File(path.Join(dir, "meminfo"), fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n", i, n.MemKiB, i, n.MemKiB/2)); err != nil {
			return err
		}
		if err := t.Dir(path.Join(dir, "hugepages")); err != nil {
			return err
		}
		for _, c := range n.CPUs {
			if err := t.File(path.Join(dir, fmt.Sprintf("cpu%d", c), "topology", "core_id"), fmt.Sprintf("%d\n", c)); err != nil {
				return err
			}
		}
		total += n.MemKiB
	}
	return t.File(path.Join("proc", "meminfo"), fmt.Sprintf("MemTotal:       %d kB\nHugepagesize:       2048 kB\nHugetlb:               0 kB\n", total))
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
