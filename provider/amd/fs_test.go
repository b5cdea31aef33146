package amd

import (
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/provider/sysfstest"
	"github.com/gputopo/gputopo/topology"
)

// TestHostileFS puts hostile entries into an in-memory tree (WithFS): each
// is an error wrapping ErrParse and the specific sentinel, refused before it
// is opened, never a panic (a symlink loop included, which
// testing/fstest.MapFS itself would follow until the stack overflows).
func TestHostileFS(t *testing.T) {
	kfd := func(rel string) string { return path.Join(sysfstest.KFDTopology, rel) }
	pci := path.Join(sysfstest.PCIDevices, "0000:03:00.0")
	fifo := &fstest.MapFile{Mode: fs.ModeNamedPipe}
	sock := &fstest.MapFile{Mode: fs.ModeSocket}
	dev := &fstest.MapFile{Mode: fs.ModeDevice | fs.ModeCharDevice}
	dir := &fstest.MapFile{Mode: fs.ModeDir}
	big := &fstest.MapFile{Data: []byte(strings.Repeat("x 1\n", sysfile.MaxFileBytes/4+1))}
	loop := func(name string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(path.Base(name)), Mode: fs.ModeSymlink}
	}
	cases := []struct {
		name string
		path string
		f    *fstest.MapFile
		also error
	}{
		{"FIFO properties", kfd("nodes/2/properties"), fifo, sysfile.ErrNotRegular},
		{"socket gpu_id", kfd("nodes/2/gpu_id"), sock, sysfile.ErrNotRegular},
		{"device generation_id", kfd("generation_id"), dev, sysfile.ErrNotRegular},
		{"directory io_link", kfd("nodes/2/io_links/0/properties"), dir, sysfile.ErrNotRegular},
		{"FIFO nodes directory", kfd("nodes"), fifo, sysfile.ErrNotRegular},
		{"FIFO PCI numa_node", pci + "/numa_node", fifo, sysfile.ErrNotRegular},
		{"FIFO partition mode", pci + "/current_compute_partition", fifo, sysfile.ErrNotRegular},
		{"FIFO NUMA distance", "sys/devices/system/node/node0/distance", fifo, sysfile.ErrNotRegular},
		{"oversized properties", kfd("nodes/2/properties"), big, topology.ErrLimit},
		{"symlink loop properties", kfd("nodes/2/properties"), loop("properties"), sysfile.ErrSymlinkLoop},
		{"symlink loop mem_banks", kfd("nodes/2/mem_banks"), loop("mem_banks"), sysfile.ErrSymlinkLoop},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := writeMachine(t, twoHives())
			require.NoError(t, tr.Set(c.path, c.f))
			inv, err := New(WithFS(tr.FS()), WithNodeName("m")).Scan(context.Background())
			require.Error(t, err, "damage accepted: %+v", inv)
			require.ErrorIs(t, err, ErrParse)
			require.ErrorIs(t, err, c.also)
			require.NotErrorIs(t, err, ErrNotDetected)
		})
	}
}

// TestRootMeansTheSame reads one generated tree from memory (WithFS) and
// from a real directory (WithRoot, with the same layout under it): the
// answers are equal, and so is the default's meaning of root.
func TestRootMeansTheSame(t *testing.T) {
	tr := writeMachine(t, twoMI300X("DPX", "NPS1"), sysfstest.MI300X8NICs()[:2]...)
	root := t.TempDir()
	require.NoError(t, tr.WriteDir(root))
	a, err := New(WithFS(tr.FS()), WithNodeName("m")).Scan(context.Background())
	require.NoError(t, err)
	b, err := New(WithRoot(root), WithNodeName("m")).Scan(context.Background())
	require.NoError(t, err)
	require.True(t, a.Node.Equal(b.Node), diffNodes(a.Node, b.Node))
	require.Equal(t, a.Devices, b.Devices)
	require.Equal(t, 2, len(a.Node.NICs()))
	// The last of WithRoot and WithFS counts.
	c, err := New(WithRoot(t.TempDir()), WithFS(tr.FS()), WithNodeName("m")).Scan(context.Background())
	require.NoError(t, err)
	require.True(t, a.Node.Equal(c.Node))
	_, err = New(WithFS(tr.FS()), WithRoot(t.TempDir())).Scan(context.Background())
	require.ErrorIs(t, err, ErrNotDetected)
	// Messages name the real path under a root, the fs.FS name otherwise.
	require.NoError(t, os.WriteFile(filepath.Join(root, sysfstest.KFDTopology, "generation_id"), []byte("x\n"), 0o644))
	_, err = New(WithRoot(root)).Scan(context.Background())
	require.ErrorContains(t, err, filepath.Join(root, sysfstest.KFDTopology, "generation_id"))
	require.NoError(t, tr.File(path.Join(sysfstest.KFDTopology, "generation_id"), "x\n"))
	_, err = New(WithFS(tr.FS())).Scan(context.Background())
	require.ErrorContains(t, err, ": "+sysfstest.KFDTopology+"/generation_id")
}

// TestKFDTopologyFS reads the KFD directory of a generated tree as a raw
// capture inside an fs.FS: the same devices as from the whole tree, with
// NUMA derived from KFD (no PCI sysfs beside it).
func TestKFDTopologyFS(t *testing.T) {
	tr := writeMachine(t, twoHives())
	whole, err := New(WithFS(tr.FS())).Scan(context.Background())
	require.NoError(t, err)
	capture, err := New(WithFS(fstest.MapFS{}), WithKFDTopologyFS(tr.FS(), sysfstest.KFDTopology)).Scan(context.Background())
	require.NoError(t, err)
	require.Equal(t, whole.Node.Len(), capture.Node.Len())
	for i := range whole.Node.Len() {
		require.Equal(t, whole.Node.Device(i).NUMA, capture.Node.Device(i).NUMA, "device %d", i)
		require.Equal(t, whole.Devices[i].GPUID, capture.Devices[i].GPUID)
	}
	require.NotEmpty(t, capture.Notes, "NUMA derived from KFD is noted")
	_, err = New(WithFS(fstest.MapFS{}), WithKFDTopologyFS(tr.FS(), "nowhere")).Scan(context.Background())
	require.ErrorIs(t, err, ErrNotDetected)
	// nil: back to the KFD topology under the root.
	again, err := New(WithFS(tr.FS()), WithKFDTopology(t.TempDir()), WithKFDTopologyFS(nil, "")).Scan(context.Background())
	require.NoError(t, err)
	require.Equal(t, whole.Node.Len(), again.Node.Len())
}
