package provider_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProviderLinksNoVendorLibrary: importing the interface package links
// neither NVML (go-nvml, cgo), ghw nor a YAML parser; detection, which
// needs them, is package provider/detect. It asks the go command for the
// package's dependencies with cgo on, as a default build has it.
func TestProviderLinksNoVendorLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, cgo := range []string{"1", "0"} {
		cmd := exec.Command(goCmd, "list", "-deps", ".")
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED="+cgo)
		out, err := cmd.Output()
		require.NoError(t, err, "go list -deps")
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"github.com/NVIDIA/go-nvml", "github.com/jaypipes/ghw", "github.com/jaypipes/pcidb", "gopkg.in/yaml.v3", "go.yaml.in/yaml", "sigs.k8s.io/yaml"} {
				require.False(t, strings.HasPrefix(dep, banned), "CGO_ENABLED=%s: provider links %s", cgo, dep)
			}
		}
		require.Contains(t, strings.Fields(string(out)), "github.com/gputopo/gputopo/topology")
	}
}

// TestProvidersImportNoAlgorithmAbove: no provider package depends on
// scoring or gang (providers may import topology and mig only).
func TestProvidersImportNoAlgorithmAbove(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goCmd, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	require.NoError(t, err, "go list")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		f := strings.Fields(line)
		for _, dep := range f[1:] {
			for _, banned := range []string{"github.com/gputopo/gputopo/scoring", "github.com/gputopo/gputopo/gang"} {
				require.False(t, dep == banned || strings.HasPrefix(dep, banned+"/"), "%s depends on %s", f[0], dep)
			}
		}
	}
}
