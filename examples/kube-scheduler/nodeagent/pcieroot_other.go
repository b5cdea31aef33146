//go:build !linux

package nodeagent

import (
	"errors"
	"fmt"
)

// SysfsPCIeRoot returns a PCIeRootFunc that always fails: sysfs exists on
// Linux only.
func SysfsPCIeRoot(root string) PCIeRootFunc {
	return func(pciBusID string) (string, error) {
		return "", fmt.Errorf("PCIe root of %s: %w", pciBusID, errors.ErrUnsupported)
	}
}
