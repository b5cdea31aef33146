package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseDefaults(t *testing.T) {
	c, err := parse(nil, &bytes.Buffer{}, env(map[string]string{"NODE_NAME": "n1"}))
	require.NoError(t, err)
	assert.Equal(t, "n1", c.serve.NodeName)
	assert.Equal(t, "gpu.gputopo.io", c.cfg.DriverName)
	assert.Equal(t, "/var/run/cdi", c.cfg.CDIDir)
	assert.Equal(t, "/var/lib/kubelet/plugins/gpu.gputopo.io", c.serve.PluginDir)
	assert.Equal(t, "/var/lib/kubelet/plugins_registry", c.serve.RegistrarDir)
	assert.Equal(t, "/var/lib/kubelet/plugins/gpu.gputopo.io/checkpoint.json", c.cfg.Checkpoint)
	assert.False(t, c.cfg.DryRun)
}

func TestParseFlags(t *testing.T) {
	c, err := parse([]string{"--node-name=a", "--driver-name=x.example.com", "--cdi-dir=/c", "--plugin-dir=/p",
		"--registrar-dir=/r", "--kubeconfig=/k", "--dry-run"}, &bytes.Buffer{}, env(nil))
	require.NoError(t, err)
	assert.Equal(t, "x.example.com", c.cfg.DriverName)
	assert.Equal(t, "/p/checkpoint.json", c.cfg.Checkpoint)
	assert.Equal(t, "/k", c.kubeconfig)
	assert.True(t, c.cfg.DryRun)
}

func TestRunBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), nil, &stderr, env(nil)))
	assert.Contains(t, stderr.String(), "--node-name")
	assert.Equal(t, 2, run(context.Background(), []string{"--node-name=a", "extra"}, &stderr, env(nil)))
	assert.Equal(t, 2, run(context.Background(), []string{"--no-such-flag"}, &stderr, env(nil)))
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &stderr, env(nil)))
}
