package sysfstest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/sysfstest"
)

func TestTreeSymlinksAndEdits(t *testing.T) {
	tr := sysfstest.New()
	f := sysfstest.PCIFunc{Path: []string{"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, Vendor: 0x10de, Device: 0x2330,
		Class: 0x030200, NUMA: 1, CPUs: "0-3", Driver: "nvidia"}
	require.NoError(t, tr.AddPCI(f))
	fsys := tr.FS()

	// The bus entry is a symlink into sys/devices, followed by readers.
	target, err := fs.ReadLink(fsys, sysfstest.PCIDevices+"/0000:01:00.0")
	require.NoError(t, err)
	require.Equal(t, "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", target)
	b, err := fs.ReadFile(fsys, sysfstest.PCIDevices+"/0000:01:00.0/numa_node")
	require.NoError(t, err)
	require.Equal(t, "1\n", string(b))

	// Writes through the symlink land in the function's directory.
	require.NoError(t, tr.File(sysfstest.PCIDevices+"/0000:01:00.0/numa_node", "0\n"))
	s, err := tr.ReadFile("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node")
	require.NoError(t, err)
	require.Equal(t, "0\n", s)

	// Remove takes the subtree; Set puts a hostile entry.
	require.NoError(t, tr.Remove("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"))
	_, err = fs.Stat(fsys, sysfstest.PCIDevices+"/0000:01:00.0/vendor")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, tr.Set("sys/x", &fstest.MapFile{Mode: fs.ModeNamedPipe}))
	st, err := fs.Stat(fsys, "sys/x")
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&fs.ModeNamedPipe)

	// A file replaced by a directory entry drops nothing else; a directory
	// replaced by a file drops what was below it.
	require.NoError(t, tr.File("a/b/c", "1"))
	require.NoError(t, tr.Dir("a/b"))
	_, err = tr.ReadFile("a/b/c")
	require.NoError(t, err)
	require.NoError(t, tr.File("a/b", "2"))
	_, err = tr.ReadFile("a/b/c")
	require.Error(t, err)

	require.Error(t, tr.File("a/b/c", ""), "a/b is a file, not a directory")
	st, err = fs.Stat(fsys, "a")
	require.NoError(t, err)
	require.True(t, st.IsDir())

	require.Error(t, tr.File("/abs", ""), "an absolute name is not an fs.FS name")
	require.Error(t, tr.File("../up", ""))
	require.NoError(t, tr.Link("loop", "loop"))
	require.Error(t, tr.File("loop/x", ""), "a symlink loop is an error")
}

// TestTreeIsAValidFS runs testing/fstest's checks over a generated tree.
func TestTreeIsAValidFS(t *testing.T) {
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI250X8()))
	require.NoError(t, fstest.TestFS(tr.FS(), "sys/class/kfd/kfd/topology/nodes/4/properties", "sys/devices/system/node/node0/distance"))
}

func TestWriteDir(t *testing.T) {
	tr := sysfstest.New()
	require.NoError(t, tr.AddAMD(sysfstest.MI250X8()))
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	// The real tree holds the same files, symlinks resolved by the kernel.
	want, err := fs.ReadFile(tr.FS(), sysfstest.PCIDevices+"/0000:03:00.0/class")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, sysfstest.PCIDevices, "0000:03:00.0", "class"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	n := 0
	require.NoError(t, fs.WalkDir(tr.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			n++
			_, err := os.Stat(filepath.Join(root, name))
			require.NoError(t, err, name)
		}
		return nil
	}))
	require.Greater(t, n, 100)

	// Restore undoes damage under a path, through the tree's symlinks.
	class := filepath.Join(root, sysfstest.PCIDevices, "0000:03:00.0", "class")
	require.NoError(t, os.Remove(class))
	require.NoError(t, os.Mkdir(class, 0o755))
	require.NoError(t, tr.Restore(root, sysfstest.PCIDevices+"/0000:03:00.0/class"))
	got, err = os.ReadFile(class)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	node := filepath.Join(root, sysfstest.KFDTopology, "nodes", "4")
	require.NoError(t, os.RemoveAll(node))
	require.NoError(t, tr.Restore(root, sysfstest.KFDTopology+"/nodes/4"))
	_, err = os.Stat(filepath.Join(node, "io_links", "0", "properties"))
	require.NoError(t, err)

	require.NoError(t, tr.Set("fifo", &fstest.MapFile{Mode: fs.ModeNamedPipe}))
	require.Error(t, tr.WriteDir(t.TempDir()))
}

func TestCPUListAndRange(t *testing.T) {
	require.Equal(t, "0-3,8,10-11", sysfstest.CPUList([]int{11, 0, 1, 2, 3, 8, 10}))
	require.Equal(t, []int{2, 3, 4}, sysfstest.Range(2, 4))
	require.Empty(t, sysfstest.CPUList(nil))
}
