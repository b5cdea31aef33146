package nodeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
	"github.com/gputopo/gputopo/topology/kube/dra"
)

// Standard device attributes defined upstream
// (k8s.io/dynamic-resource-allocation/deviceattribute), published by
// package dra; these are its names.
const (
	// StdAttrPCIeRoot is the PCIe root complex ("pci<domain>:<bus>") of
	// the device; published only when a [PCIeRootFunc] resolves it.
	StdAttrPCIeRoot = dra.StdAttrPCIeRoot
	// StdAttrPCIBusID is the device's PCI address in extended BDF form
	// ("0000:06:00.0"); whole devices with a known address only.
	StdAttrPCIBusID = dra.StdAttrPCIBusID
	// StdAttrNUMANode is the device's NUMA node as a scalar int (the form
	// that needs no feature gate); devices with no NUMA affinity get none.
	StdAttrNUMANode = dra.StdAttrNUMANode
)

// PCIeRootFunc resolves the PCIe root complex ("pci0000:00") of a PCI
// address in extended BDF form. [SysfsPCIeRoot] reads it from sysfs.
type PCIeRootFunc func(pciBusID string) (string, error)

// RenderOptions tunes Render.
type RenderOptions struct {
	// NodeName is the Kubernetes node; required.
	NodeName string
	// Driver is the DRA driver name; dra.DefaultDriver when empty.
	Driver string
	// WholeGPUsOnly publishes no MIG partition devices.
	WholeGPUsOnly bool
	// PCIeRoot resolves the standard pcieRoot attribute; nil publishes none
	// (a topology read from a file or the catalogue says nothing about the
	// root complexes of this machine).
	PCIeRoot PCIeRootFunc
	// DeviceTaints publishes unhealthy GPUs with a device taint instead of
	// leaving them out, and taints GPUs with degraded NVLink
	// (dra.Options.DeviceTaints).
	DeviceTaints bool
	// SharedCapacity makes whole GPUs shareable by consumable memory and
	// compute (dra.Options.SharedCapacity).
	SharedCapacity bool
}

// Publication is everything the agent writes for one topology: the node's
// labels and annotations, and its ResourceSlices (pool generation 0, no
// owner; the agent fills both in when it publishes).
type Publication struct {
	Labels      map[string]string           `json:"labels"`
	Annotations map[string]string           `json:"annotations"`
	Slices      []resourceapi.ResourceSlice `json:"slices"`
	// Hash is a SHA-256 of all of the above: equal hashes mean there is
	// nothing to republish.
	Hash string `json:"hash"`
	// Devices and Healthy count the node's accelerators.
	Devices int `json:"devices"`
	Healthy int `json:"healthy"`
}

var bdf = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$`)

// Render computes the publication for n. It is deterministic: the same
// topology and options give the same Hash. Errors wrap [ErrRender] and the
// sentinel of the package that failed (kube or dra).
func Render(n *topology.Node, opts RenderOptions) (*Publication, error) {
	if n == nil {
		return nil, fmt.Errorf("%w: no topology", ErrRender)
	}
	if opts.NodeName == "" {
		return nil, fmt.Errorf("%w: no node name", ErrRender)
	}
	if opts.Driver == "" {
		opts.Driver = dra.DefaultDriver
	}
	labels, annotations, err := kube.Metadata(n)
	if err != nil {
		return nil, fmt.Errorf("%w: node metadata: %w", ErrRender, err)
	}
	roots := map[int]string{}
	if opts.PCIeRoot != nil {
		for _, d := range n.Devices() {
			if id := d.PCI.String(); bdf.MatchString(id) {
				if r, err := opts.PCIeRoot(id); err == nil && r != "" && len(r) <= resourceapi.DeviceAttributeMaxValueLength {
					roots[d.Index] = r
				}
			}
		}
	}
	slices, err := dra.ResourceSlices(n, dra.Options{Driver: opts.Driver, NodeName: opts.NodeName, WholeGPUsOnly: opts.WholeGPUsOnly,
		PCIeRoots: roots, DeviceTaints: opts.DeviceTaints, SharedCapacity: opts.SharedCapacity})
	if err != nil {
		return nil, fmt.Errorf("%w: resource slices: %w", ErrRender, err)
	}
	p := &Publication{Labels: labels, Annotations: annotations, Slices: slices, Devices: n.Len()}
	for _, d := range n.Devices() {
		if d.Health == topology.Healthy {
			p.Healthy++
		}
	}
	b, err := json.Marshal(struct {
		L, A map[string]string
		S    []resourceapi.ResourceSlice
	}{labels, annotations, slices})
	if err != nil {
		return nil, fmt.Errorf("%w: hashing: %w", ErrRender, err)
	}
	sum := sha256.Sum256(b)
	p.Hash = hex.EncodeToString(sum[:])
	return p, nil
}
