package pcitree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// ErrParse is topology.ErrParse, re-exported: it is wrapped by every error
// about a sysfs entry that exists but cannot be read or parsed (an
// unparsable value, a FIFO or directory in place of a file, a symlink loop,
// an I/O error); the message names the file. A file over
// [sysfile.MaxFileBytes] or a directory over [sysfile.MaxDirEntries] also
// wraps [topology.ErrLimit]; an unreadable one keeps fs.ErrPermission in
// the chain.
var ErrParse = topology.ErrParse

// Function is what sysfs says about one PCI function.
type Function struct {
	// Address is the function's bus address.
	Address topology.PCIAddress
	// Ancestors are the PCI bridges from the root port down to the
	// function's parent (nil for a function on a root bus, or when Placed
	// is false).
	Ancestors []topology.PCIAddress
	// HostBridge names the root bus the function hangs from ("pci0000:00");
	// "" when Placed is false.
	HostBridge string
	// Placed reports whether the function's path through the PCI tree was
	// read (its sysfs entry is a symlink into /sys/devices).
	Placed bool
	// NUMA is the function's NUMA node, -1 when unknown.
	NUMA int
	// CPUs is the function's local CPU list; empty when unknown.
	CPUs topology.CPUSet
	// Vendor and Device are the PCI vendor and device ids; 0 when unknown.
	Vendor, Device uint16
	// Class is the 24-bit class code (0x030200 for a 3D controller); 0 when
	// unknown.
	Class uint32
	// Driver is the bound driver's name, "" when none.
	Driver string
}

// DevicesDir returns the fs.FS name of the directory listing the PCI
// functions under a sysfs mount (sys is normally "sys", the fs.FS name of
// /sys under the filesystem root).
func DevicesDir(sys string) string { return path.Join(sys, "bus", "pci", "devices") }

// Read reads the function at addr from the sysfs mounted at sys in fsys
// (see [sysfile]: every file is read through its safe reader). A function
// that does not exist gives an error wrapping fs.ErrNotExist; an attribute
// that exists but cannot be parsed gives one wrapping [ErrParse].
// Missing attributes leave their fields unknown. The context is checked
// before every file read; its error is returned as is.
func Read(ctx context.Context, fsys fs.FS, sys string, addr topology.PCIAddress) (Function, error) {
	dir := path.Join(DevicesDir(sys), addr.String())
	f := Function{Address: addr, NUMA: -1}
	if err := ctx.Err(); err != nil {
		return f, err
	}
	if st, err := sysfile.Stat(ctx, fsys, dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return f, fmt.Errorf("pcitree: PCI function %s: %w", addr, err)
		}
		return f, fmt.Errorf("%w: PCI function %s: %w", ErrParse, addr, err)
	} else if !st.IsDir() {
		return f, fmt.Errorf("%w: PCI function %s: %s is not a directory", ErrParse, addr, sysfile.Path(fsys, dir))
	}
	if target, err := sysfile.ReadLink(ctx, fsys, dir); err == nil {
		f.HostBridge, f.Ancestors, f.Placed = parsePath(target, addr)
	} else if err := ctx.Err(); err != nil {
		return f, err
	}
	var err error
	if f.NUMA, err = readInt(ctx, fsys, path.Join(dir, "numa_node"), -1); err != nil {
		return f, err
	}
	if f.NUMA < -1 {
		return f, fmt.Errorf("%w: %s: NUMA node %d", ErrParse, sysfile.Path(fsys, path.Join(dir, "numa_node")), f.NUMA)
	}
	if s, ok, err := readString(ctx, fsys, path.Join(dir, "local_cpulist")); err != nil {
		return f, err
	} else if ok {
		if f.CPUs, err = topology.ParseCPUSet(s); err != nil {
			return f, fmt.Errorf("%w: %s: %w", ErrParse, sysfile.Path(fsys, path.Join(dir, "local_cpulist")), err)
		}
	}
	v, err := readHex(ctx, fsys, path.Join(dir, "vendor"), 16)
	if err != nil {
		return f, err
	}
	d, err := readHex(ctx, fsys, path.Join(dir, "device"), 16)
	if err != nil {
		return f, err
	}
	c, err := readHex(ctx, fsys, path.Join(dir, "class"), 24)
	if err != nil {
		return f, err
	}
	f.Vendor, f.Device, f.Class = uint16(v), uint16(d), uint32(c)
	if t, err := sysfile.ReadLink(ctx, fsys, path.Join(dir, "driver")); err == nil {
		f.Driver = path.Base(filepath.ToSlash(t))
	} else if err := ctx.Err(); err != nil {
		return f, err
	}
	return f, nil
}

// parsePath reads the host bridge and the bridges above addr from a sysfs
// device path. A nested root bus (Intel VMD) restarts the chain.
func parsePath(target string, addr topology.PCIAddress) (host string, anc []topology.PCIAddress, ok bool) {
	var chain []topology.PCIAddress
	for _, c := range strings.Split(filepath.ToSlash(target), "/") {
		if strings.HasPrefix(c, "pci") && strings.Contains(c, ":") {
			host, chain = c, nil
			continue
		}
		if a, err := topology.ParsePCIAddress(c); err == nil && strings.Count(c, ":") == 2 {
			chain = append(chain, a)
		}
	}
	if host == "" || len(chain) == 0 || chain[len(chain)-1] != addr {
		return "", nil, false
	}
	return host, slices.Clip(chain[:len(chain)-1]), true
}

// PathClass returns the PCIe path class between two functions, as
// nvidia-smi names it:
//
//   - PIX: below one common PCIe switch, each side crossing at most one
//     bridge under the switch's upstream port (or functions of one device);
//   - PXB: below a common bridge, through several switches;
//   - PHB: no common bridge, same host bridge (root bus);
//   - NODE: different host bridges on the same NUMA node;
//   - SYS: different NUMA nodes.
//
// When either side's place in the tree is unknown only NUMA decides (NODE or
// SYS). Unknown NUMA nodes count as the same node when numaNodes is 1 (a
// single-node machine) and as different nodes otherwise (the pessimistic
// answer).
func PathClass(a, b Function, numaNodes int) topology.LinkKind {
	if a.Placed && b.Placed && a.HostBridge == b.HostBridge {
		c := 0
		for c < len(a.Ancestors) && c < len(b.Ancestors) && a.Ancestors[c] == b.Ancestors[c] {
			c++
		}
		if c > 0 {
			if len(a.Ancestors)-c <= 1 && len(b.Ancestors)-c <= 1 {
				return topology.LinkPIX
			}
			return topology.LinkPXB
		}
		return topology.LinkPHB
	}
	return NUMAClass(a.NUMA, b.NUMA, numaNodes)
}

// NUMAClass is the PCIe class of a path known only by its endpoints' NUMA
// nodes: NODE on one node, SYS across nodes. Unknown nodes (-1) count as
// the same node only on a single-node machine (numaNodes == 1).
func NUMAClass(a, b, numaNodes int) topology.LinkKind {
	switch {
	case a >= 0 && b >= 0 && a == b:
		return topology.LinkNODE
	case a >= 0 && b >= 0:
		return topology.LinkSYS
	case numaNodes == 1:
		return topology.LinkNODE
	}
	return topology.LinkSYS
}

// NIC is a network function found in the PCI tree.
type NIC struct {
	Function
	// RDMA is the first RDMA device name (infiniband/<name>), "" when none.
	RDMA string
	// Netdev is the first network interface name (net/<name>), "" when none.
	Netdev string
	// SpeedMbps is the interface speed when the link is up; 0 otherwise.
	SpeedMbps uint64
}

// NICs lists the physical network functions (PCI class 0x02, not SR-IOV
// virtual functions) under the sysfs mounted at sys in fsys, ordered by
// address. A
// missing PCI directory gives no NICs and no error. A directory of more
// than [sysfile.MaxDirEntries] functions, or more than maxNICs network
// functions, is an error wrapping [topology.ErrLimit].
func NICs(ctx context.Context, fsys fs.FS, sys string) ([]NIC, error) {
	dir := DevicesDir(sys)
	ents, err := sysfile.ReadDir(ctx, fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(ctx, err)
	}
	var out []NIC
	for _, e := range ents {
		addr, err := topology.ParsePCIAddress(e.Name())
		if err != nil {
			continue
		}
		cls, err := readHex(ctx, fsys, path.Join(dir, e.Name(), "class"), 24)
		if err != nil {
			return nil, err
		}
		if cls>>16 != 0x02 {
			continue
		}
		if _, err := sysfile.Lstat(ctx, fsys, path.Join(dir, e.Name(), "physfn")); err == nil {
			continue
		}
		if len(out) == maxNICs {
			return nil, fmt.Errorf("%w: %s lists more than topology.MaxDevices (%d) network functions: %w", ErrParse, sysfile.Path(fsys, dir), maxNICs, topology.ErrLimit)
		}
		f, err := Read(ctx, fsys, sys, addr)
		if err != nil {
			return nil, err
		}
		n := NIC{Function: f, RDMA: firstEntry(ctx, fsys, path.Join(dir, e.Name(), "infiniband")), Netdev: firstEntry(ctx, fsys, path.Join(dir, e.Name(), "net"))}
		if n.Netdev != "" {
			if s, err := readInt(ctx, fsys, path.Join(dir, e.Name(), "net", n.Netdev, "speed"), 0); err == nil && s > 0 {
				n.SpeedMbps = uint64(s)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(x, y NIC) int { return x.Address.Compare(y.Address) })
	return out, nil
}

// maxNICs bounds the network functions [NICs] returns: as many as a node
// may have devices (an error names topology.MaxDevices, the limit a
// caller can look up).
const maxNICs = topology.MaxDevices

// firstEntry returns the first name (in sorted order) listed in dir; "" when
// none or dir cannot be read.
func firstEntry(ctx context.Context, fsys fs.FS, dir string) string {
	ents, err := sysfile.ReadDir(ctx, fsys, dir)
	if err != nil || len(ents) == 0 {
		return ""
	}
	first := ents[0].Name()
	for _, e := range ents[1:] {
		first = min(first, e.Name())
	}
	return first
}

// wrap marks a read error as ErrParse, except a done context's error,
// which is returned as is. A permission error keeps fs.ErrPermission in the
// chain, a size error topology.ErrLimit.
func wrap(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrParse, err)
}

// readString returns the trimmed content of path; ok is false when the file
// does not exist.
func readString(ctx context.Context, fsys fs.FS, name string) (s string, ok bool, err error) {
	b, err := sysfile.ReadFile(ctx, fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap(ctx, err)
	}
	return strings.TrimSpace(string(b)), true, nil
}

// readInt reads a decimal integer, returning def when the file is absent.
func readInt(ctx context.Context, fsys fs.FS, name string, def int) (int, error) {
	s, ok, err := readString(ctx, fsys, name)
	if err != nil || !ok {
		return def, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return def, fmt.Errorf("%w: %s: %q is not an integer", ErrParse, sysfile.Path(fsys, name), Truncate(s))
	}
	return v, nil
}

// readHex reads a "0x"-prefixed hex number of at most bits bits, returning 0
// when the file is absent.
func readHex(ctx context.Context, fsys fs.FS, name string, bits int) (uint64, error) {
	s, ok, err := readString(ctx, fsys, name)
	if err != nil || !ok {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, bits)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %q is not a %d-bit hex number", ErrParse, sysfile.Path(fsys, name), Truncate(s), bits)
	}
	return v, nil
}

// Truncate shortens a value quoted in an error message to 40 bytes.
func Truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
