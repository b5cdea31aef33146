package nodeagent

import (
	"path/filepath"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

// SysfsPCIeRoot returns a PCIeRootFunc reading the PCIe root complex of a
// device from the sysfs tree under root ("/" on the node itself), with the
// upstream deviceattribute package: the first element of the
// /sys/bus/pci/devices/<address> link's target ("pci0000:00").
func SysfsPCIeRoot(root string) PCIeRootFunc {
	sys := filepath.Join(root, "sys")
	return func(pciBusID string) (string, error) {
		attr, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(pciBusID, deviceattribute.WithFSFromRoot(sys))
		if err != nil {
			return "", err
		}
		if attr.Value.StringValue == nil {
			return "", nil
		}
		return *attr.Value.StringValue, nil
	}
}
