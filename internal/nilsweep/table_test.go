package nilsweep

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite table_gen_test.go from the packages' sources")

// The table names every exported function and type with methods of the
// swept packages: a new one joins the sweep when the table is rewritten
// (go test ./internal/nilsweep -run TestSweepTable -update).
func TestSweepTable(t *testing.T) {
	entries := listAPI(t)
	if *update {
		require.NoError(t, writeTable("table_gen_test.go", entries))
		return
	}
	var want []string
	for _, e := range entries {
		want = append(want, e.key())
	}
	var got []string
	for k := range funcs {
		got = append(got, k)
	}
	for k := range types {
		got = append(got, k)
	}
	require.ElementsMatch(t, want, got, "the table is stale: go test ./internal/nilsweep -run TestSweepTable -update")
}
