package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --timeout is a queue pass's budget: past it the jobs not yet planned
// wait, marked, and the plan says it is partial; with time to spare the
// pass is whole.
func TestGangTimeoutBudget(t *testing.T) {
	args := []string{"gang", "--cluster", "testdata/gang/nvl72.yaml", "--job", "testdata/gang/queue.yaml"}
	code, out, errOut := runCLI(t, append(args, "--timeout", "1ns")...)
	assert.Equal(t, exitNoFit, code, errOut)
	assert.Contains(t, out, "partial: the pass's budget (--timeout) ran out")
	assert.Contains(t, out, "not planned")

	code, out, errOut = runCLI(t, append(args, "--timeout", "1ns", "--json")...)
	assert.Equal(t, exitNoFit, code, errOut)
	var plan struct {
		Partial bool
		Entries []struct{ Unplanned bool }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	assert.True(t, plan.Partial)
	require.NotEmpty(t, plan.Entries)
	assert.True(t, plan.Entries[0].Unplanned)

	code, out, errOut = runCLI(t, append(args, "--timeout", "10m")...)
	assert.Equal(t, exitNoFit, code, errOut) // the file's queue has a job that never fits
	assert.NotContains(t, out, "partial")
	assert.NotContains(t, out, "not planned")
	assert.Contains(t, out, "backfill")

	code, _, errOut = runCLI(t, append(args, "--timeout", "-1s")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--timeout")
}
