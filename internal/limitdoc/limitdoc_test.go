package limitdoc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.go")
	src := `// Package p.
//
// # Limits
//
// Text.
//
//	limit         value     bounds
//	maxRows       1,048,576  rows
//	maxLine       64 KiB    one line (a long comment, with  two spaces)
//	MaxFile       2 MiB     a file
//	maxDepth      15        levels
//	maxTotal      1e300     a sum of weights
//
// # Other
//
//	notALimit     7         not in the table
package p
`
	require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
	got, err := Table(path)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"maxRows": 1 << 20, "maxLine": 64 << 10, "MaxFile": 2 << 20, "maxDepth": 15, "maxTotal": 1e300}, got)
}

func TestTableErrors(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"none.go":  "// Package p.\npackage p\n",
		"bad.go":   "// # Limits\n//\n//\tmaxX  1.5e3  a sum\npackage p\n",
		"expr.go":  "// # Limits\n//\n//\tmaxX  MaxDevices+256  rows\npackage p\n",
		"power.go": "// # Limits\n//\n//\tmaxX  1e999  a sum\npackage p\n",
		"huge.go":  "// # Limits\n//\n//\tmaxX  9,000,000,000 GiB  bytes\npackage p\n",
		"unit.go":  "// # Limits\n//\n//\tmaxX  2 PiB  bytes\npackage p\n",
		"range.go": "// # Limits\n//\n//\tmaxX  99999999999999999999  bytes\npackage p\n",
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
		_, err := Table(path)
		require.Error(t, err, name)
	}
	_, err := Table(filepath.Join(dir, "missing.go"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
