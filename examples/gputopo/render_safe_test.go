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

// hostileName sets the terminal's title, turns text red, returns the
// cursor, uses an 8-bit CSI and a right-to-left override.
const hostileName = "evil\x1b]0;pwned\x07\x1b[31mred\rover\u009b2J\u202egnp.exe"

func assertTermSafe(t *testing.T, s string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u009b", "\u202e"} {
		assert.NotContains(t, s, bad, "a raw %q reached the terminal", bad)
	}
}

func TestTermSafeEscapes(t *testing.T) {
	var b bytes.Buffer
	w := newTermSafe(&b)
	// Written a byte at a time: runes split between writes are still seen.
	for i := range len(hostileName) {
		_, err := w.Write([]byte{hostileName[i]})
		require.NoError(t, err)
	}
	_, err := w.Write([]byte("\tok é 日本\n"))
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	assert.Equal(t, `evil\x1b]0;pwned\x07\x1b[31mred\x0dover\u009b2J\u202egnp.exe`+"\tok é 日本\n", b.String())
}

// A job and node named with escape sequences in the input files reach the
// text output escaped; --json escapes them by itself.
func TestGangTextOutputSanitised(t *testing.T) {
	dir := t.TempDir()
	q := func(s string) string {
		return strings.NewReplacer(`\`, `\\`, "\x1b", `\e`, "\x07", `\a`, "\r", `\r`, "\u009b", `\x9b`, `"`, `\"`).Replace(s)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(
		"nodes: [{name: \"n-"+q("\x1b[2J")+"\", machine: dgx-h100}]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "j.yaml"), []byte(
		"name: \""+q(hostileName)+"\"\npodSets: [{name: w, replicas: 1, gpus: 2}]\n"), 0o644))
	code, out, errOut := runCLI(t, "gang", "--cluster", filepath.Join(dir, "c.yaml"), "--job", filepath.Join(dir, "j.yaml"))
	require.Equal(t, exitOK, code, errOut)
	assertTermSafe(t, out+errOut)
	assert.Contains(t, out, `\x1b[2J`, "the node name, escaped")
	assert.Contains(t, out, `evil\x1b]0;pwned\x07`, "the job name, escaped")

	code, out, errOut = runCLI(t, "gang", "--cluster", filepath.Join(dir, "c.yaml"), "--job", filepath.Join(dir, "j.yaml"), "--json")
	require.Equal(t, exitOK, code, errOut)
	assertTermSafe(t, out+errOut)
}
