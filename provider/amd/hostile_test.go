//go:build linux

package amd

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// replaceWith removes whatever is at path and puts make(path) there,
// creating parent directories.
func replaceWith(t *testing.T, path string, make func(string) error) {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, make(path))
}

func mkfifo(p string) error   { return syscall.Mkfifo(p, 0o644) }
func mkdir(p string) error    { return os.Mkdir(p, 0o755) }
func selfLoop(p string) error { return os.Symlink(filepath.Base(p), p) }
func bigFile(p string) error {
	return os.WriteFile(p, []byte(strings.Repeat("x 1\n", sysfile.MaxFileBytes/4+1)), 0o644)
}
func mksocket(p string) error { return syscall.Mknod(p, syscall.S_IFSOCK|0o644, 0) }
func writeStr(s string) func(string) error {
	return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
}

// scanNoHang runs Scan and fails the test, rather than hanging it, should
// a read block on a FIFO.
func scanNoHang(t *testing.T, ctx context.Context, root string) (*Inventory, error) {
	t.Helper()
	return hostile.NoHang(t, func() (*Inventory, error) {
		return New(WithRoot(root), WithNodeName("m")).Scan(ctx)
	})
}

// writeDir writes m into a fresh real directory and returns it, for the
// tests of what only a real filesystem has (FIFOs that block, permissions).
func writeDir(t *testing.T, m sysfstest.AMDMachine) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, writeMachine(t, m).WriteDir(root))
	return root
}

// TestHostileTrees walks the error paths of the KFD and sysfs readers on a
// real directory (WithRoot): every damage gives an error wrapping ErrParse
// (and the more specific sentinel where one applies), never a hang, a panic
// or a silent answer.
func TestHostileTrees(t *testing.T) {
	kfd := func(rel string) string { return filepath.Join("sys/class/kfd/kfd/topology", rel) }
	pci := "sys/bus/pci/devices/0000:03:00.0/"
	cases := []struct {
		name string
		path string // relative to the root
		make func(string) error
		also error // a second sentinel the error must wrap; nil: none
	}{
		{"malformed value", kfd("nodes/2/properties"), writeStr("simd_count lots\n"), nil},
		{"line without value", kfd("nodes/2/properties"), writeStr("simd_count\n"), nil},
		{"repeated key", kfd("nodes/2/properties"), writeStr("a 1\na 2\n"), nil},
		{"link without node_to", kfd("nodes/2/io_links/0/properties"), writeStr("type 2\nnode_from 2\n"), nil},
		{"link from another node", kfd("nodes/2/io_links/0/properties"), writeStr("type 2\nnode_from 3\nnode_to 0\n"), nil},
		{"link to an impossible node", kfd("nodes/2/io_links/0/properties"), writeStr(fmt.Sprintf("type 2\nnode_from 2\nnode_to %d\n", maxKFDNodes+1)), nil},
		{"garbage gpu_id", kfd("nodes/2/gpu_id"), writeStr("-1\n"), nil},
		{"garbage generation_id", kfd("generation_id"), writeStr("soon\n"), nil},
		{"garbage partition mode", pci + "current_compute_partition", writeStr("HEX\n"), nil},
		{"garbage PCI numa_node", pci + "numa_node", writeStr("zero\n"), nil},
		{"missing properties", kfd("nodes/2/properties"), func(string) error { return nil }, fs.ErrNotExist},

		{"FIFO properties", kfd("nodes/2/properties"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO generation_id", kfd("generation_id"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO gpu_id", kfd("nodes/2/gpu_id"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO name", kfd("nodes/2/name"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO bank", kfd("nodes/2/mem_banks/0/properties"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO io_link", kfd("nodes/2/io_links/0/properties"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO p2p_links directory", kfd("nodes/2/p2p_links"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO nodes directory", kfd("nodes"), mkfifo, sysfile.ErrNotRegular},
		{"FIFO PCI numa_node", pci + "numa_node", mkfifo, sysfile.ErrNotRegular},
		{"FIFO PCI class", pci + "class", mkfifo, sysfile.ErrNotRegular},
		{"FIFO partition mode", pci + "current_compute_partition", mkfifo, sysfile.ErrNotRegular},
		{"FIFO NUMA distance", "sys/devices/system/node/node0/distance", mkfifo, sysfile.ErrNotRegular},
		{"FIFO NUMA directory", "sys/devices/system/node", mkfifo, sysfile.ErrNotRegular},
		{"FIFO DRM card directory", "sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0/drm/renderD128/device", func(p string) error {
			// renderD128/device/drm, read for the card name, is a FIFO.
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			return mkfifo(filepath.Join(p, "drm"))
		}, sysfile.ErrNotRegular},
		{"socket properties", kfd("nodes/2/properties"), mksocket, sysfile.ErrNotRegular},

		{"directory properties", kfd("nodes/2/properties"), mkdir, sysfile.ErrNotRegular},
		{"directory gpu_id", kfd("nodes/2/gpu_id"), mkdir, sysfile.ErrNotRegular},
		{"directory PCI vendor", pci + "vendor", mkdir, sysfile.ErrNotRegular},
		{"file in place of io_links", kfd("nodes/2/io_links"), writeStr("0\n"), sysfile.ErrNotRegular},

		{"symlink loop properties", kfd("nodes/2/properties"), selfLoop, nil},
		{"symlink loop gpu_id", kfd("nodes/2/gpu_id"), selfLoop, nil},
		{"symlink loop PCI local_cpulist", pci + "local_cpulist", selfLoop, nil},
		{"symlink loop mem_banks", kfd("nodes/2/mem_banks"), selfLoop, nil},

		{"oversized properties", kfd("nodes/2/properties"), bigFile, topology.ErrLimit},
		{"oversized name", kfd("nodes/2/name"), bigFile, topology.ErrLimit},
		{"oversized PCI local_cpulist", pci + "local_cpulist", bigFile, topology.ErrLimit},
		{"oversized NUMA cpulist", "sys/devices/system/node/node0/cpulist", bigFile, topology.ErrLimit},
	}
	// One real tree serves every case: each damages it, scans, and restores
	// what it damaged (writing a tree per case took most of a minute on a
	// disk-backed TMPDIR).
	tr := writeMachine(t, twoHives())
	m := t.TempDir()
	require.NoError(t, tr.WriteDir(m))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var damaged []string
			t.Cleanup(func() {
				for _, name := range damaged {
					require.NoError(t, tr.Restore(m, name))
				}
			})
			if strings.HasPrefix(c.path, "sys/devices/system/node/node0/cpulist") {
				// Make the NUMA cpulist the only source of the GPUs' CPUs.
				for _, a := range []string{"03", "43", "83", "c3"} {
					name := "sys/bus/pci/devices/0000:" + a + ":00.0/local_cpulist"
					damaged = append(damaged, name)
					require.NoError(t, os.Remove(filepath.Join(m, name)))
				}
			}
			damaged = append(damaged, c.path)
			replaceWith(t, filepath.Join(m, c.path), c.make)
			inv, err := scanNoHang(t, context.Background(), m)
			require.Error(t, err, "damage accepted: %+v", inv)
			require.ErrorIs(t, err, ErrParse)
			if c.also != nil {
				require.ErrorIs(t, err, c.also)
			}
			require.NotErrorIs(t, err, ErrNotDetected)
		})
	}
}

// TestUnreadableFile: a file this process may not read outside a KFD node
// (a PCI attribute) is ErrParse with fs.ErrPermission in the chain.
func TestUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of their mode")
	}
	root := writeDir(t, twoHives())
	require.NoError(t, os.Chmod(filepath.Join(root, "sys/bus/pci/devices/0000:03:00.0/numa_node"), 0))
	_, err := New(WithRoot(root)).Scan(context.Background())
	require.ErrorIs(t, err, ErrParse)
	require.ErrorIs(t, err, fs.ErrPermission)
}

// TestTooManyKFDNodes: a nodes/ directory past maxKFDNodes is refused
// before any node is read (the nodes here have no files, which reading
// would report instead).
func TestTooManyKFDNodes(t *testing.T) {
	tr := sysfstest.New()
	for i := range maxKFDNodes + 1 {
		require.NoError(t, tr.Dir(path.Join(sysfstest.KFDTopology, "nodes", fmt.Sprint(i))))
	}
	_, err := New(WithFS(tr.FS())).Scan(context.Background())
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, ErrParse)
	require.Contains(t, err.Error(), "amd limit maxKFDNodes")
}

// TestTooManyGPUs: more GPU nodes than topology.MaxDevices is refused
// before per-device structures are built.
func TestTooManyGPUs(t *testing.T) {
	tr := sysfstest.New()
	for i := range topology.MaxDevices + 1 {
		dir := path.Join(sysfstest.KFDTopology, "nodes", fmt.Sprint(i))
		require.NoError(t, tr.File(path.Join(dir, "properties"), "simd_count 4\nsimd_per_cu 4\n"))
		require.NoError(t, tr.File(path.Join(dir, "gpu_id"), fmt.Sprintf("%d\n", i+1)))
	}
	_, err := New(WithFS(tr.FS())).Scan(context.Background())
	require.ErrorIs(t, err, topology.ErrLimit)
	require.ErrorIs(t, err, ErrParse)
	require.Contains(t, err.Error(), "topology.MaxDevices")
}

// TestCancelInsideNode cancels the context while one node's files are
// being read: the reader stops at the next file, before the node is done.
func TestCancelInsideNode(t *testing.T) {
	tr := writeMachine(t, twoHives())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	orig := readFileHook
	defer func() { readFileHook = orig }()
	var after []string
	canceled := false
	readFileHook = func(path string, err error) {
		if canceled && err == nil {
			after = append(after, path)
		}
		if strings.HasSuffix(path, "nodes/2/gpu_id") {
			cancel()
			canceled = true
		}
	}
	_, err := New(WithFS(tr.FS())).Scan(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, canceled)
	require.Empty(t, after, "files read after the cancellation")
	require.NotContains(t, err.Error(), "malformed")
}

// TestHostileTreesRestored: after the hostile cases the shared tree reads
// as before (a restore that missed something would fail a later case for
// the wrong reason, or pass one for the wrong reason).
func TestHostileTreesRestored(t *testing.T) {
	tr := writeMachine(t, twoHives())
	m := t.TempDir()
	require.NoError(t, tr.WriteDir(m))
	want, err := New(WithFS(tr.FS()), WithNodeName("m")).Scan(context.Background())
	require.NoError(t, err)
	name := "sys/bus/pci/devices/0000:03:00.0/numa_node"
	replaceWith(t, filepath.Join(m, name), mkfifo)
	_, err = scanNoHang(t, context.Background(), m)
	require.ErrorIs(t, err, sysfile.ErrNotRegular)
	require.NoError(t, tr.Restore(m, name))
	got, err := scanNoHang(t, context.Background(), m)
	require.NoError(t, err)
	require.True(t, want.Node.Equal(got.Node), diffNodes(got.Node, want.Node))
}
