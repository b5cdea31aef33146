//go:build linux

package sysfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// scanNoHang runs Scan and fails the test, rather than hanging it, should
// a read block on a FIFO.
func scanNoHang(t *testing.T, ctx context.Context, root string) (*Inventory, error) {
	t.Helper()
	return hostile.NoHang(t, func() (*Inventory, error) {
		return New(WithRoot(root), WithNodeName("hgx")).Scan(ctx)
	})
}

// TestHostileTrees walks the error paths of the sysfs provider: FIFOs,
// sockets, directories, symlink loops and oversized files in place of the
// files it (or ghw) reads are ErrParse errors, never hangs.
func TestHostileTrees(t *testing.T) {
	gpu0 := "sys/devices/" + strings.Join(hgxPath(0, 0), "/") + "/"
	nic0 := "sys/devices/" + strings.Join(hgxPath(0, 2), "/") + "/"
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	sock := func(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o644, 0) }
	dir := func(p string) error { return os.Mkdir(p, 0o755) }
	loop := func(p string) error { return os.Symlink(filepath.Base(p), p) }
	big := func(p string) error {
		return os.WriteFile(p, []byte(strings.Repeat("1 ", sysfile.MaxFileBytes)), 0o644)
	}
	cases := []struct {
		name, path string
		make       func(string) error
		also       error
	}{
		{"FIFO modalias (read by ghw)", gpu0 + "modalias", fifo, sysfile.ErrNotRegular},
		{"FIFO revision (read by ghw)", gpu0 + "revision", fifo, sysfile.ErrNotRegular},
		{"oversized modalias", gpu0 + "modalias", big, topology.ErrLimit},
		{"FIFO numa_node", gpu0 + "numa_node", fifo, sysfile.ErrNotRegular},
		{"socket local_cpulist", gpu0 + "local_cpulist", sock, sysfile.ErrNotRegular},
		{"directory vendor", gpu0 + "vendor", dir, sysfile.ErrNotRegular},
		{"symlink loop class", gpu0 + "class", loop, syscall.ELOOP},
		{"oversized local_cpulist", gpu0 + "local_cpulist", big, topology.ErrLimit},
		{"FIFO NIC class", nic0 + "class", fifo, sysfile.ErrNotRegular},
		{"FIFO NIC speed", nic0 + "net/ibp0/speed", fifo, nil},
		{"FIFO NUMA distance", "sys/devices/system/node/node1/distance", fifo, sysfile.ErrNotRegular},
		{"oversized NUMA distance", "sys/devices/system/node/node1/distance", big, topology.ErrLimit},
		{"FIFO NUMA directory", "sys/devices/system/node", fifo, sysfile.ErrNotRegular},
		{"garbage NUMA distance", "sys/devices/system/node/node0/distance", func(p string) error { return os.WriteFile(p, []byte("10 x\n"), 0o644) }, nil},
		{"FIFO PCI devices directory", "sys/bus/pci/devices", fifo, sysfile.ErrNotRegular},
	}
	// One real tree serves every case: each damages it, scans, and restores
	// what it damaged.
	tr := hgxH100(t, "")
	root := tr.root(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() { require.NoError(t, tr.Restore(root, c.path)) })
			p := filepath.Join(root, c.path)
			require.NoError(t, os.RemoveAll(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, c.make(p))
			inv, err := scanNoHang(t, context.Background(), root)
			if c.name == "FIFO NIC speed" {
				// The speed of a NIC is optional: sysfs fails the read (EINVAL)
				// when the link is down, so an unreadable speed means unknown.
				require.NoError(t, err)
				require.Zero(t, inv.Node.NICs()[0].SpeedMbps)
				return
			}
			require.Error(t, err, "damage accepted")
			require.ErrorIs(t, err, ErrParse)
			if c.also != nil {
				require.ErrorIs(t, err, c.also)
			}
		})
	}
}

// TestPCIIDsNotRegular: a FIFO or an oversized file where pci.ids is
// looked for is not loaded (names are then unknown), and Scan still
// answers.
func TestPCIIDsNotRegular(t *testing.T) {
	tr := hgxH100(t, "")
	p := filepath.Join(tr.root(t), "usr/share/hwdata/pci.ids")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, syscall.Mkfifo(p, 0o644))
	inv, err := scanNoHang(t, context.Background(), tr.root(t))
	require.NoError(t, err)
	require.Empty(t, inv.Devices[0].Product)
	_, ok := pciIDsPath(tr.root(t))
	require.False(t, ok)
}

// TestTooManyNUMANodes: a NUMA directory listing more than maxNUMANodes
// nodes is refused before the distance table is allocated.
func TestTooManyNUMANodes(t *testing.T) {
	tr := hgxH100(t, "")
	for i := 2; i <= maxNUMANodes; i++ {
		require.NoError(t, os.Mkdir(filepath.Join(tr.root(t), "sys/devices/system/node", fmt.Sprintf("node%d", i)), 0o755))
	}
	_, err := New(WithRoot(tr.root(t))).Scan(context.Background())
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, ErrParse)
	require.Contains(t, err.Error(), "sysfs limit maxNUMANodes")
}

// TestTooManyPCIFunctions: a PCI devices directory listing more than
// maxPCIFunctions entries is refused, naming the limit, before any
// function is read.
func TestTooManyPCIFunctions(t *testing.T) {
	tr := hgxH100(t, "")
	dir := filepath.Join(tr.root(t), "sys/bus/pci/devices")
	for i := range maxPCIFunctions + 1 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("0001:%02x:%02x.%x", i>>8, (i>>3)&0x1f, i&7)), nil, 0o644))
	}
	_, err := New(WithRoot(tr.root(t))).Scan(context.Background())
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, ErrParse)
	require.Contains(t, err.Error(), "sysfs limit maxPCIFunctions")
}

// TestCanceledInScan: a context canceled before Scan returns its error
// unwrapped.
func TestCanceledInScan(t *testing.T) {
	tr := hgxH100(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(WithRoot(tr.root(t))).Scan(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrParse)
}

// TestHostileTreesRestored: the shared tree of TestHostileTrees reads as
// before once a damage is restored.
func TestHostileTreesRestored(t *testing.T) {
	tr := hgxH100(t, "")
	root := tr.root(t)
	want, err := scanNoHang(t, context.Background(), root)
	require.NoError(t, err)
	name := "sys/bus/pci/devices"
	require.NoError(t, os.RemoveAll(filepath.Join(root, name)))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, name), 0o644))
	_, err = scanNoHang(t, context.Background(), root)
	require.ErrorIs(t, err, sysfile.ErrNotRegular)
	require.NoError(t, tr.Restore(root, name))
	got, err := scanNoHang(t, context.Background(), root)
	require.NoError(t, err)
	require.True(t, want.Node.Equal(got.Node))
}
