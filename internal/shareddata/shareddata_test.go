package shareddata

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModuleRoot(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, ok := moduleRoot(wd)
	require.True(t, ok)
	assert.FileExists(t, filepath.Join(root, "go.mod"))
	assert.Equal(t, filepath.Dir(filepath.Dir(wd)), root, "internal/shareddata is two levels below the root module")
	_, ok = moduleRoot(t.TempDir())
	assert.False(t, ok)
}

// With the data beside the checkout, Dir answers through the module's
// link, the path go test's cache rechecks.
func TestDirThroughModuleLink(t *testing.T) {
	t.Setenv("GPUTOPO_SHARED", "")
	d, ok := Dir()
	if !ok {
		t.Skip("no ../shared beside the checkout")
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, _ := moduleRoot(wd)
	assert.Equal(t, filepath.Join(root, "testdata", LinkName), d)
	assert.DirExists(t, filepath.Join(d, "data"))
}

// A directory with a go.mod and no link falls back to the walk: nothing
// found in an empty temporary tree.
func TestDirWithoutLink(t *testing.T) {
	t.Setenv("GPUTOPO_SHARED", "")
	tmp := t.TempDir()
	mod := filepath.Join(tmp, "repo")
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "pkg"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o644))
	t.Chdir(filepath.Join(mod, "pkg"))
	_, ok := Dir()
	assert.False(t, ok)
	// ../shared appears beside the checkout, seen through a link as committed.
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "shared", "data"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "testdata"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join("..", "..", "shared"), filepath.Join(mod, "testdata", LinkName)))
	d, ok := Dir()
	assert.True(t, ok)
	assert.Equal(t, filepath.Join(mod, "testdata", LinkName), d)
}
