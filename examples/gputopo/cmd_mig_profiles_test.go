package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A well-formed profile no GPU of the file offers is refused the same way
// by every mig command that takes profile names, in a mix or as the
// request: exit 2 and the same message.
func TestMIGUnknownProfileRefusedEverywhere(t *testing.T) {
	const layout = "internal/webui/demo/mig.json"
	const want = "unknown profile: gputopo: invalid request: no GPU in the fleet has profile 99g.999gb"
	for _, args := range [][]string{
		{"mig", "template", "--layout", layout, "--mix", "99g.999gb=3"},
		{"mig", "template", "--layout", layout, "--mix", "1g.10gb=2,99g.999gb=3"},
		{"mig", "place", "--layout", layout, "--profile", "99g.999gb"},
		{"mig", "place", "--layout", layout, "--profile", "1g.10gb", "--mix", "99g.999gb=1"},
		{"mig", "defrag", "--layout", layout, "--profile", "99g.999gb"},
		{"mig", "show", "--layout", layout, "--mix", "99g.999gb=3"},
	} {
		code, out, errOut := runCLI(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, out)
		assert.Contains(t, errOut, want, args)
	}
	// A known profile still plans.
	code, _, errOut := runCLI(t, "mig", "show", "--layout", layout, "--mix", "1g.10gb=3")
	assert.Equal(t, exitOK, code, errOut)
}
