package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountExportedTopLevelNames(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	write("a.go", `package p
const (A = 1; b = 2)
var C, d = 1, 2
type E struct{ F int }
func (E) G() {}
func H() {}
func h() {}
`)
	// The same name in a second build of the package counts once.
	write("b.go", "package p\nfunc H() {}\ntype I interface{ J() }\n")
	write("a_test.go", "package p\nfunc TestK() {}\nvar L = 1\n")
	n, err := count(dir)
	require.NoError(t, err)
	assert.Equal(t, 5, n, "A, C, E, H, I")
}

func TestRunMarksPackagesOverTarget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "topology")
	require.NoError(t, os.Mkdir(dir, 0o700))
	src := "package topology\n"
	for i := range 61 {
		src += "func F" + string(rune('A'+i/26)) + string(rune('a'+i%26)) + "() {}\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.go"), []byte(src), 0o600))
	var out bytes.Buffer
	require.NoError(t, run(&out, []string{dir}))
	assert.Contains(t, out.String(), "  61")
	t.Chdir(filepath.Dir(dir))
	out.Reset()
	require.NoError(t, run(&out, []string{"topology"}))
	assert.Contains(t, out.String(), "topology                       61  target <= 60: over")
}

// TestRunFailsOnLongFiles: a library file of 1,001 lines is listed and
// fails the run; 1,000 lines and a long test file do not.
func TestRunFailsOnLongFiles(t *testing.T) {
	dir := t.TempDir()
	lines := func(n int) []byte {
		return []byte("package p\n\nfunc F() {}\n" + strings.Repeat("\n", n-3))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.go"), lines(1000), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a_test.go"), lines(5000), 0o600))
	var out bytes.Buffer
	require.NoError(t, run(&out, []string{dir}))
	assert.NotContains(t, out.String(), "more than")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.go"), lines(1001), 0o600))
	out.Reset()
	err := run(&out, []string{dir})
	require.Error(t, err)
	assert.Contains(t, out.String(), "b.go: 1001 lines, more than 1000")
	assert.NotContains(t, out.String(), "a.go:")
}
