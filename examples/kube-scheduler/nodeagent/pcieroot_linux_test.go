package nodeagent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSysfsPCIeRoot(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "sys/devices/pci0000:16/0000:16:01.0/0000:17:00.0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	bus := filepath.Join(root, "sys/bus/pci/devices")
	require.NoError(t, os.MkdirAll(bus, 0o755))
	require.NoError(t, os.Symlink("../../../devices/pci0000:16/0000:16:01.0/0000:17:00.0", filepath.Join(bus, "0000:17:00.0")))

	resolve := SysfsPCIeRoot(root)
	r, err := resolve("0000:17:00.0")
	require.NoError(t, err)
	assert.Equal(t, "pci0000:16", r)
	_, err = resolve("0000:18:00.0")
	assert.Error(t, err, "no such device")
	_, err = resolve("not-an-address")
	assert.Error(t, err)

	// End to end through Render, on a node whose first GPU is that device.
	p, err := Render(pciNode(t), RenderOptions{NodeName: "ws", PCIeRoot: resolve})
	require.NoError(t, err)
	devs := devices(p.Slices)
	require.NotNil(t, devs["gpu-0"].Attributes[StdAttrPCIeRoot].StringValue)
	assert.Equal(t, "pci0000:16", *devs["gpu-0"].Attributes[StdAttrPCIeRoot].StringValue)
	assert.NotContains(t, devs["gpu-1"].Attributes, StdAttrPCIeRoot)
}
