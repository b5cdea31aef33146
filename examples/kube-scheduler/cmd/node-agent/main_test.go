package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/kube-scheduler/nodeagent"
	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDryRunCatalog(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--source=catalog:dgx-h100", "--dry-run", "--driver-name=gpu.example.com"},
		&out, &errOut, env(map[string]string{"NODE_NAME": "n1"}))
	require.Equal(t, 0, code, errOut.String())
	var pub nodeagent.Publication
	require.NoError(t, json.Unmarshal(out.Bytes(), &pub))
	assert.Equal(t, "8", pub.Labels[kube.LabelGPUCount])
	require.NotEmpty(t, pub.Slices)
	assert.Equal(t, "gpu.example.com", pub.Slices[0].Spec.Driver)
	assert.Equal(t, "n1", *pub.Slices[0].Spec.NodeName)
	back, err := kube.DecodeAnnotation(pub.Annotations[kube.AnnotationTopology])
	require.NoError(t, err)
	want, err := catalog.Get("dgx-h100")
	require.NoError(t, err)
	assert.True(t, back.Equal(want))
}

func TestDryRunFile(t *testing.T) {
	want, err := catalog.Get("workstation-2gpu-nvlink")
	require.NoError(t, err)
	b, err := want.MarshalJSON()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "node.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--source=file:" + path, "--dry-run", "--node-name=ws", "--whole-gpus-only"},
		&out, &errOut, env(nil))
	require.Equal(t, 0, code, errOut.String())
	var pub nodeagent.Publication
	require.NoError(t, json.Unmarshal(out.Bytes(), &pub))
	assert.Equal(t, 2, pub.Devices)
}

func TestParse(t *testing.T) {
	c, err := parse([]string{"--source=catalog:dgx-a100", "--interval=5s", "--resync=0", "--cleanup-on-exit=false"},
		&bytes.Buffer{}, env(map[string]string{"NODE_NAME": "from-env"}))
	require.NoError(t, err)
	assert.Equal(t, "from-env", c.opts.NodeName)
	assert.Equal(t, "catalog:dgx-a100", c.opts.Source.Name())
	assert.False(t, c.opts.CleanupOnExit)
	assert.Negative(t, c.opts.Resync, "0 means never")
	assert.Nil(t, c.opts.PCIeRoot, "no sysfs for a catalogue machine")

	c, err = parse([]string{"--node-name=x"}, &bytes.Buffer{}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, "detect", c.opts.Source.Name())
	assert.True(t, c.opts.CleanupOnExit, "cleanup is the binary's default")
	assert.NotNil(t, c.opts.PCIeRoot)
}

func TestBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no node":         {"--source=catalog:dgx-h100"},
		"bad source":      {"--node-name=x", "--source=nvml"},
		"empty file":      {"--node-name=x", "--source=file:"},
		"unknown machine": {"--node-name=x", "--source=catalog:nope"},
		"zero interval":   {"--node-name=x", "--interval=0s"},
		"unknown flag":    {"--node-name=x", "--frobnicate"},
		"extra argument":  {"--node-name=x", "extra"},
	} {
		t.Run(name, func(t *testing.T) {
			var errOut bytes.Buffer
			assert.Equal(t, 2, run(context.Background(), args, &bytes.Buffer{}, &errOut, env(nil)))
			assert.Contains(t, errOut.String(), "node-agent")
		})
	}
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}, env(nil)))
	// A file that does not exist fails when read, not when parsed.
	var errOut bytes.Buffer
	assert.Equal(t, 1, run(context.Background(), []string{"--node-name=x", "--source=file:/nonexistent/node.json", "--dry-run"},
		&bytes.Buffer{}, &errOut, env(nil)))
	assert.Contains(t, errOut.String(), "cannot read topology file")
}
