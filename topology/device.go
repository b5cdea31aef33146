package topology

import (
	"fmt"
	"slices"
	"strings"
)

// Vendor identifies the maker of an accelerator.
type Vendor uint8

// The vendors the model knows. The zero value is VendorUnknown.
const (
	VendorUnknown Vendor = iota
	VendorNVIDIA
	VendorAMD
	VendorIntel
	VendorOther
)

var vendorNames = [...]string{"unknown", "nvidia", "amd", "intel", "other"}

// String returns the lower-case vendor name ("nvidia", "amd", ...).
func (v Vendor) String() string {
	if int(v) < len(vendorNames) {
		return vendorNames[v]
	}
	return fmt.Sprintf("Vendor(%d)", uint8(v))
}

// parseVendor parses a vendor name case-insensitively. It accepts the names
// [Vendor.String] prints and the PCI vendor ids "10de" (NVIDIA), "1002" (AMD)
// and "8086" (Intel), with or without a "0x" prefix; "" parses to
// VendorUnknown. Any other text is an error wrapping [ErrParse].
func parseVendor(s string) (Vendor, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" || t == "unknown" {
		return VendorUnknown, nil
	}
	switch strings.TrimPrefix(t, "0x") {
	case "nvidia", "10de":
		return VendorNVIDIA, nil
	case "amd", "1002":
		return VendorAMD, nil
	case "intel", "8086":
		return VendorIntel, nil
	case "other":
		return VendorOther, nil
	}
	return VendorUnknown, fmt.Errorf("%w: unknown vendor %q (want one of %s)", ErrParse, s, strings.Join(vendorNames[:], ", "))
}

// MarshalText implements encoding.TextMarshaler: the name [Vendor.String]
// returns. A value outside the Vendor constants is an error wrapping
// [ErrInvalidRequest].
func (v Vendor) MarshalText() ([]byte, error) {
	if int(v) >= len(vendorNames) {
		return nil, fmt.Errorf("%w: %v is not a topology.Vendor constant", ErrInvalidRequest, v)
	}
	return []byte(vendorNames[v]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with parseVendor.
func (v *Vendor) UnmarshalText(b []byte) error {
	p, err := parseVendor(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Health says whether a device can take work. The zero value is Healthy.
type Health uint8

// Device health states.
const (
	// Healthy devices can be allocated.
	Healthy Health = iota
	// Unhealthy devices are present but must not be allocated (an XID
	// error, fell off the bus, links unreadable). Device.HealthReason says why.
	Unhealthy
)

// String returns "healthy" or "unhealthy".
func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	}
	return fmt.Sprintf("Health(%d)", uint8(h))
}

// parseHealth parses "healthy" or "unhealthy" case-insensitively; ""
// parses to Healthy, the zero value. Any other text is an error wrapping
// [ErrParse].
func parseHealth(s string) (Health, error) {
	switch strings.ToLower(s) {
	case "", "healthy":
		return Healthy, nil
	case "unhealthy":
		return Unhealthy, nil
	}
	return Healthy, fmt.Errorf("%w: unknown health %q (want healthy or unhealthy)", ErrParse, s)
}

// MarshalText implements encoding.TextMarshaler: the name [Health.String]
// returns. A value outside the Health constants is an error wrapping
// [ErrInvalidRequest].
func (h Health) MarshalText() ([]byte, error) {
	if h > Unhealthy {
		return nil, fmt.Errorf("%w: %v is not a topology.Health constant", ErrInvalidRequest, h)
	}
	return []byte(h.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with parseHealth.
func (h *Health) UnmarshalText(b []byte) error {
	p, err := parseHealth(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// PartitionKind says how a device can be split into smaller devices.
type PartitionKind uint8

// Partition kinds. The zero value is PartitionNone.
const (
	// PartitionNone: the device cannot be partitioned (or it is not known).
	PartitionNone PartitionKind = iota
	// PartitionMIG: NVIDIA Multi-Instance GPU (slot geometry, see package mig).
	PartitionMIG
	// PartitionAMD: AMD Instinct compute/memory partition modes
	// (SPX/DPX/QPX/CPX, NPS1/NPS4), with identical children.
	PartitionAMD
)

var partitionKindNames = [...]string{"none", "mig", "amd"}

// String returns "none", "mig" or "amd".
func (k PartitionKind) String() string {
	if int(k) < len(partitionKindNames) {
		return partitionKindNames[k]
	}
	return fmt.Sprintf("PartitionKind(%d)", uint8(k))
}

// parsePartitionKind parses a name [PartitionKind.String] returns ("none",
// "mig", "amd"), case-insensitively; "" parses to PartitionNone, the zero
// value. Any other text is an error wrapping [ErrParse].
func parsePartitionKind(s string) (PartitionKind, error) {
	if s == "" {
		return PartitionNone, nil
	}
	i := slices.Index(partitionKindNames[:], strings.ToLower(s))
	if i < 0 {
		return PartitionNone, fmt.Errorf("%w: unknown partition kind %q (want one of %s)", ErrParse, s, strings.Join(partitionKindNames[:], ", "))
	}
	return PartitionKind(i), nil
}

// MarshalText implements encoding.TextMarshaler: the name
// [PartitionKind.String] returns. A value outside the PartitionKind
// constants is an error wrapping [ErrInvalidRequest].
func (k PartitionKind) MarshalText() ([]byte, error) {
	if int(k) >= len(partitionKindNames) {
		return nil, fmt.Errorf("%w: %v is not a topology.PartitionKind constant", ErrInvalidRequest, k)
	}
	return []byte(partitionKindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with parsePartitionKind.
func (k *PartitionKind) UnmarshalText(b []byte) error {
	p, err := parsePartitionKind(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// Partitioning describes a device's partition capability and current mode.
// The zero value means "not partitionable".
type Partitioning struct {
	// Kind is the partitioning technology.
	Kind PartitionKind `json:"kind,omitempty"`
	// Enabled reports MIG mode on (NVIDIA) or a compute mode other than SPX
	// (AMD). For an AMD logical partition device it is true.
	Enabled bool `json:"enabled,omitempty"`
	// ComputeMode is the current AMD compute partition mode ("SPX", "CPX", ...).
	ComputeMode string `json:"computeMode,omitempty"`
	// MemoryMode is the current AMD memory partition mode ("NPS1", "NPS4").
	MemoryMode string `json:"memoryMode,omitempty"`
	// AvailableModes lists the compute modes the device accepts, when known.
	AvailableModes []string `json:"availableModes,omitempty"`
	// Index is the partition number of this device within its Package, for
	// logical partition devices (an MI300X XCP); 0 otherwise.
	Index int `json:"index,omitempty"`
}

func (p Partitioning) clone() Partitioning {
	p.AvailableModes = slices.Clone(p.AvailableModes)
	return p
}

func (p Partitioning) equal(q Partitioning) bool {
	return p.Kind == q.Kind && p.Enabled == q.Enabled && p.ComputeMode == q.ComputeMode &&
		p.MemoryMode == q.MemoryMode && slices.Equal(p.AvailableModes, q.AvailableModes) && p.Index == q.Index
}

// Device is one schedulable accelerator of a node: a physical GPU, or a
// logical partition (an AMD XCP, one GCD of an MI250X).
type Device struct {
	// Index is the device's position in its Node, 0..n-1, as the vendor tool
	// numbers it (nvidia-smi index, KFD node order).
	Index int `json:"index"`
	// ID is a stable identifier, normally the UUID ("GPU-5f1c...").
	// Empty when unknown; non-empty IDs are unique within a node.
	ID string `json:"id,omitempty"`
	// PCI is the device's PCI bus address; the zero value means unknown.
	PCI PCIAddress `json:"pci,omitzero"`
	// Vendor is the device's maker.
	Vendor Vendor `json:"vendor,omitzero"`
	// Model is the marketing name ("NVIDIA H200", "AMD Instinct MI300X").
	// It decides per-lane link rates (see [EstimateBandwidth]).
	Model string `json:"model,omitempty"`
	// MemoryBytes is the device memory capacity; 0 when unknown.
	MemoryBytes uint64 `json:"memoryBytes,omitempty"`
	// NUMA is the CPU NUMA node the device is attached to; -1 when unknown.
	NUMA int `json:"numa"`
	// CPUs is the device's CPU affinity; empty when unknown.
	CPUs CPUSet `json:"cpus,omitzero"`
	// Health says whether the device can take work.
	Health Health `json:"health,omitzero"`
	// HealthReason explains an Unhealthy state.
	HealthReason string `json:"healthReason,omitempty"`
	// Package groups devices that share one physical package: the XCPs of
	// one MI300X in CPX mode, the two GCDs of an MI250X. Empty for a
	// stand-alone device.
	Package string `json:"package,omitempty"`
	// Partition describes partition capability and mode.
	Partition Partitioning `json:"partition,omitzero"`
}

func (d Device) clone() Device {
	d.Partition = d.Partition.clone()
	return d
}

func (d Device) equal(e Device) bool {
	return d.Index == e.Index && d.ID == e.ID && d.PCI == e.PCI && d.Vendor == e.Vendor &&
		d.Model == e.Model && d.MemoryBytes == e.MemoryBytes && d.NUMA == e.NUMA &&
		d.CPUs.Equal(e.CPUs) && d.Health == e.Health && d.HealthReason == e.HealthReason &&
		d.Package == e.Package && d.Partition.equal(e.Partition)
}

// NIC is a network adapter seen in the node's PCIe tree, used for GPU-to-NIC
// affinity (GPUDirect RDMA wants a NIC behind the same PCIe switch).
type NIC struct {
	// Name is the column name nvidia-smi prints ("NIC0", "mlx5_0").
	Name string `json:"name"`
	// Device is the RDMA device name from the NIC legend ("mlx5_0"), if known.
	Device string `json:"device,omitempty"`
	// PCI is the NIC's bus address; zero when unknown.
	PCI PCIAddress `json:"pci,omitzero"`
	// NUMA is the NUMA node of the NIC; -1 when unknown.
	NUMA int `json:"numa"`
	// SpeedMbps is the link speed in Mb/s; 0 when unknown.
	SpeedMbps uint64 `json:"speedMbps,omitempty"`
}
