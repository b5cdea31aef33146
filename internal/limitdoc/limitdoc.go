// Package limitdoc reads the Limits table of a package's documentation, for
// the tests that check it against the package's constants:
//
//	// # Limits
//	//
//	//	limit         value    bounds
//	//	maxRows       1,024    rows of one file
//	//	maxFileBytes  2 MiB    a file
//
// A value is a decimal with optional thousands commas and an optional
// " KiB", " MiB" or " GiB" unit, or a power of ten written 1e300.
package limitdoc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// row is one line of a table: tab, name, value (with its unit), two or
// more spaces, what it bounds.
var row = regexp.MustCompile(`^//\t(\w+)\s+([0-9][0-9,]*(?: [KMG]iB)?|1e[0-9]+)(?:\s{2,}\S.*)?$`)

// errNoTable is returned for a file without a "# Limits" heading.
var errNoTable = errors.New("limitdoc: no Limits table")

// Table returns the rows of the Limits table in the Go source file path:
// each limit's name and its value.
func Table(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, seen := false, false
	out := map[string]float64{}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "// # Limits":
			in, seen = true, true
		case !in:
		case strings.HasPrefix(line, "// #") || !strings.HasPrefix(line, "//"):
			in = false
		case strings.HasPrefix(line, "//\tlimit "):
		case strings.HasPrefix(line, "//\t"):
			m := row.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("limitdoc: %s: cannot read the row %q", path, line)
			}
			v, err := value(m[2])
			if err != nil {
				return nil, fmt.Errorf("limitdoc: %s: %q: %w", path, line, err)
			}
			out[m[1]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !seen {
		return nil, fmt.Errorf("%w in %s", errNoTable, path)
	}
	return out, nil
}

// value reads "16,384", "64 KiB", "2 MiB" or "1e300". Integers stay exact
// (up to 2^53, beyond any limit of the project).
func value(s string) (float64, error) {
	if exp, ok := strings.CutPrefix(s, "1e"); ok {
		e, err := strconv.Atoi(exp)
		if err != nil || e > 308 {
			return 0, fmt.Errorf("power of ten %q out of range", s)
		}
		return strconv.ParseFloat(s, 64)
	}
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseInt(strings.ReplaceAll(num, ",", ""), 10, 64)
	if err != nil {
		return 0, err
	}
	shift := 0
	switch unit {
	case "":
	case "KiB":
		shift = 10
	case "MiB":
		shift = 20
	case "GiB":
		shift = 30
	default:
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	if v >= 1<<(53-shift) { // (checked before the shift, which would overflow)
		return 0, fmt.Errorf("%q is not exact as a float64", s)
	}
	v <<= shift
	return float64(v), nil
}

// Check fails t unless the Limits table of the Go source file path lists
// exactly the limits of want, with their values.
func Check[V int64 | float64](t testing.TB, path string, want map[string]V) {
	t.Helper()
	got, err := Table(path)
	require.NoError(t, err)
	wantFloat := make(map[string]float64, len(want))
	for name, v := range want {
		wantFloat[name] = float64(v)
	}
	require.Equal(t, wantFloat, got, "the Limits table of %s", path)
}
