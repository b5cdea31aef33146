package kube

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gputopo/gputopo/topology"
)

// Sentinel errors; every error the package returns wraps one of them or
// one of the topology package's. Each wraps the canonical sentinel of its
// kind (see the repository's docs/errors.md), so both errors.Is checks hold.
var (
	// ErrBadLabel: a label this package reads has a malformed value, or a
	// label [Labels] would write cannot hold the node's value. It wraps
	// [topology.ErrParse].
	ErrBadLabel = fmt.Errorf("kube: malformed label: %w", topology.ErrParse)
	// ErrBadAnnotation: the topology annotation cannot be decoded (unknown
	// encoding, bad base64 or gzip, or a topology document that does not
	// parse or validate; the topology package's sentinel is wrapped too).
	// It wraps [topology.ErrParse].
	ErrBadAnnotation = fmt.Errorf("kube: malformed topology annotation: %w", topology.ErrParse)
	// ErrTooLarge: an encoded or decoded annotation exceeds its size budget
	// or declares more than a topology limit allows; such errors name the
	// limit. It wraps [topology.ErrLimit].
	ErrTooLarge = fmt.Errorf("kube: topology annotation too large: %w", topology.ErrLimit)
	// ErrNoTopology: a node carries no topology annotation.
	ErrNoTopology = errors.New("kube: node has no topology annotation")
)

// Label keys written by GPU Feature Discovery (NVIDIA) and AMD's node
// labeller, which [Labels] reproduces so existing node selectors keep
// working.
const (
	// LabelGPUCount is GFD's count of NVIDIA GPUs on the node.
	LabelGPUCount = "nvidia.com/gpu.count"
	// LabelGPUProduct is GFD's product name, spaces replaced by dashes
	// ("NVIDIA-H100-80GB-HBM3").
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelGPUMemory is GFD's per-GPU memory in MiB (NVML's "MB").
	LabelGPUMemory = "nvidia.com/gpu.memory"
	// LabelMIGCapable is GFD's "true" when any GPU on the node supports MIG.
	LabelMIGCapable = "nvidia.com/mig.capable"
	// LabelClique is the multi-node NVLink partition, "<clusterUUID>.<cliqueID>".
	LabelClique = topology.LabelClique
	// LabelAMDProduct is AMD's product name, spaces replaced by
	// underscores ("AMD_Instinct_MI300X").
	LabelAMDProduct = "amd.com/gpu.product-name"
	// LabelAMDVRAM is AMD's per-GPU memory in GiB with a "G" suffix ("192G").
	LabelAMDVRAM = "amd.com/gpu.vram"
)

// Prefix is the domain of the vendor-neutral labels and the annotation this
// package owns.
const Prefix = "gputopo.io/"

// Vendor-neutral label keys.
const (
	// LabelDeviceCount is the number of accelerators of every vendor.
	LabelDeviceCount = Prefix + "device.count"
	// LabelHealthy is the number of healthy accelerators.
	LabelHealthy = Prefix + "device.healthy"
	// LabelVendor is the vendor of most accelerators ("nvidia", "amd").
	LabelVendor = Prefix + "vendor"
	// LabelInterconnect is the closest link kind between any two devices,
	// lower case ("nvswitch", "nvlink", "xgmi", "pix", ..., "sys", "none").
	LabelInterconnect = Prefix + "interconnect"
	// LabelLargestIsland is the size of the largest fabric island (devices
	// joined by NVLink, NVSwitch or xGMI).
	LabelLargestIsland = Prefix + "island.largest"
	// LabelIslands is the number of fabric islands.
	LabelIslands = Prefix + "island.count"
	// LabelNUMANodes is the number of distinct NUMA nodes devices sit on.
	LabelNUMANodes = Prefix + "numa.count"
	// LabelPartition is "mig" or "amd" when some device can be partitioned.
	LabelPartition = Prefix + "partition"
	// LabelFingerprint is the first 32 hex digits (128 bits) of the
	// topology's [topology.Node.ShapeFingerprint]: equal values mean equal
	// hardware shape (UUIDs, PCI addresses, names and health left out), so
	// identical servers share it.
	LabelFingerprint = Prefix + "fingerprint"
)

// labelKeys lists every key Labels may write, in a fixed order.
var labelKeys = []string{
	LabelGPUCount, LabelGPUProduct, LabelGPUMemory, LabelMIGCapable, LabelClique,
	LabelAMDProduct, LabelAMDVRAM,
	LabelDeviceCount, LabelHealthy, LabelVendor, LabelInterconnect, LabelLargestIsland,
	LabelIslands, LabelNUMANodes, LabelPartition, LabelFingerprint,
}

// LabelKeys returns every label key [Labels] may write. A node agent that
// republishes should delete the keys of this list that the new label set
// lacks (a clique label disappears when the fabric manager loses the
// partition).
func LabelKeys() []string { return append([]string(nil), labelKeys...) }

// Labels returns the node labels describing n: GPU Feature Discovery's
// nvidia.com/ labels for the NVIDIA devices, AMD's amd.com/ labels for the
// AMD devices, and the vendor-neutral gputopo.io/ labels for all of them.
// Every key and value passes Kubernetes' label validation; product names
// are cut to 63 characters and stripped of characters labels cannot hold.
//
// As with GFD, the product and memory labels describe one model: on a node
// with mixed models, the most common one (ties go to the lowest device
// index); the count labels count every device of the vendor.
func Labels(n *topology.Node) (map[string]string, error) {
	if n == nil {
		return nil, fmt.Errorf("%w: nil node", topology.ErrInvalidTopology)
	}
	devs := n.Devices()
	out := map[string]string{LabelDeviceCount: strconv.Itoa(len(devs))}
	if len(devs) == 0 {
		return out, nil
	}
	healthy := 0
	vendorCount := map[topology.Vendor]int{}
	var partition topology.PartitionKind
	for _, d := range devs {
		if d.Health == topology.Healthy {
			healthy++
		}
		vendorCount[d.Vendor]++
		if d.Partition.Kind != topology.PartitionNone && partition == topology.PartitionNone {
			partition = d.Partition.Kind
		}
	}
	out[LabelHealthy] = strconv.Itoa(healthy)
	if v := majorityVendor(devs, vendorCount); v != topology.VendorUnknown {
		out[LabelVendor] = strings.ToLower(v.String())
	}
	if partition != topology.PartitionNone {
		out[LabelPartition] = partition.String()
	}
	out[LabelInterconnect] = strings.ToLower(bestLink(n).String())
	largest := 0
	for _, isl := range n.Islands() {
		largest = max(largest, len(isl))
	}
	out[LabelLargestIsland] = strconv.Itoa(largest)
	out[LabelIslands] = strconv.Itoa(len(n.Islands()))
	out[LabelNUMANodes] = strconv.Itoa(len(n.NUMANodes()))
	out[LabelFingerprint] = n.ShapeFingerprint().String()[:32]

	if nv := ofVendor(devs, topology.VendorNVIDIA); len(nv) > 0 {
		out[LabelGPUCount] = strconv.Itoa(len(nv))
		model := majorityModel(nv)
		if p := sanitizeLabelValue(model.Model, '-'); p != "" {
			out[LabelGPUProduct] = p
		}
		if model.MemoryBytes > 0 {
			out[LabelGPUMemory] = strconv.FormatUint(model.MemoryBytes>>20, 10)
		}
		capable := false
		for _, d := range nv {
			capable = capable || d.Partition.Kind == topology.PartitionMIG
		}
		out[LabelMIGCapable] = strconv.FormatBool(capable)
	}
	if f := n.Fabric(); !f.IsZero() {
		out[LabelClique] = f.String()
	}
	if amd := ofVendor(devs, topology.VendorAMD); len(amd) > 0 {
		model := majorityModel(amd)
		if p := sanitizeLabelValue(model.Model, '_'); p != "" {
			out[LabelAMDProduct] = p
		}
		if model.MemoryBytes > 0 {
			out[LabelAMDVRAM] = strconv.FormatUint((model.MemoryBytes+(1<<29))>>30, 10) + "G"
		}
	}
	for k, v := range out {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			// The keys are the package's constants.
			return nil, fmt.Errorf("%w: label key %q: %s", topology.ErrInternal, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("%w: %s=%q: %s", ErrBadLabel, k, v, strings.Join(errs, "; "))
		}
	}
	return out, nil
}

func ofVendor(devs []topology.Device, v topology.Vendor) []topology.Device {
	var out []topology.Device
	for _, d := range devs {
		if d.Vendor == v {
			out = append(out, d)
		}
	}
	return out
}

func majorityVendor(devs []topology.Device, count map[topology.Vendor]int) topology.Vendor {
	best := devs[0].Vendor
	for _, d := range devs {
		if count[d.Vendor] > count[best] {
			best = d.Vendor
		}
	}
	return best
}

// majorityModel returns the first device of the most common model; ties go
// to the model that appears first.
func majorityModel(devs []topology.Device) topology.Device {
	count := map[string]int{}
	for _, d := range devs {
		count[d.Model]++
	}
	best := devs[0]
	for _, d := range devs {
		if count[d.Model] > count[best.Model] {
			best = d
		}
	}
	return best
}

// bestLink returns the kind of the closest link between any two devices
// (LinkNone for a node of fewer than two devices).
func bestLink(n *topology.Node) topology.LinkKind {
	var best topology.Link
	found := false
	for i := 0; i < n.Len(); i++ {
		for j := i + 1; j < n.Len(); j++ {
			if l := n.Link(i, j); !found || l.Closeness() > best.Closeness() {
				best, found = l, true
			}
		}
	}
	return best.Kind
}

// sanitizeLabelValue turns a product name into a label value the way GFD
// and AMD's labeller do (spaces become sep), additionally replacing
// characters a label value cannot hold with sep and cutting to 63
// characters with alphanumeric ends.
func sanitizeLabelValue(s string, sep byte) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = sep
		}
	}
	isAlnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if len(b) > validation.LabelValueMaxLength {
		b = b[:validation.LabelValueMaxLength]
	}
	for len(b) > 0 && !isAlnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !isAlnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Summary is what node labels say about a node's accelerators, read by
// [ParseLabels]. Fields whose labels are absent keep their zero value.
type Summary struct {
	// Count is the number of accelerators: gputopo.io/device.count, else
	// nvidia.com/gpu.count.
	Count int
	// Healthy is gputopo.io/device.healthy, else Count.
	Healthy int
	// Vendor is gputopo.io/vendor, else inferred from which vendor's
	// labels are present.
	Vendor topology.Vendor
	// Product is the raw product label (nvidia.com/gpu.product or
	// amd.com/gpu.product-name).
	Product string
	// MemoryMiB is per-device memory: nvidia.com/gpu.memory, or
	// amd.com/gpu.vram converted from GiB.
	MemoryMiB uint64
	// MIGCapable is nvidia.com/mig.capable.
	MIGCapable bool
	// Partition is gputopo.io/partition.
	Partition topology.PartitionKind
	// Clique is the multi-node NVLink partition (nvidia.com/gpu.clique).
	Clique topology.FabricDomain
	// Interconnect is gputopo.io/interconnect (LinkNone when absent).
	Interconnect topology.LinkKind
	// LargestIsland, Islands and NUMANodes are the gputopo.io/island.largest,
	// island.count and numa.count labels.
	LargestIsland, Islands, NUMANodes int
	// Fingerprint is gputopo.io/fingerprint: a prefix of the node's
	// [topology.Node.ShapeFingerprint].
	Fingerprint string
}

// ParseLabels reads the labels [Labels] writes (and GFD or AMD's labeller
// write on their own). A malformed value is an error wrapping [ErrBadLabel]
// that names the key; absent labels are not errors.
func ParseLabels(labels map[string]string) (Summary, error) {
	var s Summary
	var errs []error
	num := func(key string, dst *int) bool {
		v, ok := labels[key]
		if !ok {
			return false
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a non-negative integer", ErrBadLabel, key, v))
			return false
		}
		*dst = n
		return true
	}
	if !num(LabelDeviceCount, &s.Count) {
		num(LabelGPUCount, &s.Count)
	}
	if !num(LabelHealthy, &s.Healthy) {
		s.Healthy = s.Count
	}
	num(LabelLargestIsland, &s.LargestIsland)
	num(LabelIslands, &s.Islands)
	num(LabelNUMANodes, &s.NUMANodes)

	if v, ok := labels[LabelVendor]; ok {
		if err := s.Vendor.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %w", ErrBadLabel, LabelVendor, v, err))
		}
	}
	if v, ok := labels[LabelGPUProduct]; ok {
		s.Product = v
		if s.Vendor == topology.VendorUnknown {
			s.Vendor = topology.VendorNVIDIA
		}
	} else if v, ok := labels[LabelAMDProduct]; ok {
		s.Product = v
		if s.Vendor == topology.VendorUnknown {
			s.Vendor = topology.VendorAMD
		}
	}
	if v, ok := labels[LabelGPUMemory]; ok {
		m, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a MiB count", ErrBadLabel, LabelGPUMemory, v))
		}
		s.MemoryMiB = m
	} else if v, ok := labels[LabelAMDVRAM]; ok {
		g, err := strconv.ParseUint(strings.TrimSuffix(v, "G"), 10, 64)
		if err != nil || !strings.HasSuffix(v, "G") || g > math.MaxUint64>>10 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not <GiB>G", ErrBadLabel, LabelAMDVRAM, v))
		} else {
			s.MemoryMiB = g << 10
		}
	}
	if v, ok := labels[LabelMIGCapable]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a boolean", ErrBadLabel, LabelMIGCapable, v))
		}
		s.MIGCapable = b
	}
	if v, ok := labels[LabelPartition]; ok {
		if err := s.Partition.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %w", ErrBadLabel, LabelPartition, v, err))
		}
	}
	if v, ok := labels[LabelClique]; ok {
		f, err := parseFabricDomain(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %w", ErrBadLabel, LabelClique, v, err))
		}
		s.Clique = f
	}
	if v, ok := labels[LabelInterconnect]; ok {
		if err := s.Interconnect.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %w", ErrBadLabel, LabelInterconnect, v, err))
		}
	}
	if v, ok := labels[LabelFingerprint]; ok {
		if len(v) != 32 || strings.Trim(v, "0123456789abcdef") != "" {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not 32 lower-case hex digits", ErrBadLabel, LabelFingerprint, v))
		} else {
			s.Fingerprint = v
		}
	}
	if s.Healthy > s.Count {
		errs = append(errs, fmt.Errorf("%w: %s=%d exceeds the device count %d", ErrBadLabel, LabelHealthy, s.Healthy, s.Count))
	}
	if err := errors.Join(errs...); err != nil {
		return Summary{}, err
	}
	return s, nil
}

// parseFabricDomain parses a clique label value, "<clusterUUID>.<cliqueID>"
// as [topology.FabricDomain.String] formats it; "" parses to the zero value.
func parseFabricDomain(s string) (topology.FabricDomain, error) {
	if s == "" {
		return topology.FabricDomain{}, nil
	}
	i := strings.LastIndexByte(s, '.')
	if i <= 0 {
		return topology.FabricDomain{}, fmt.Errorf("%w: fabric domain %q: want <clusterUUID>.<cliqueID>", topology.ErrParse, s)
	}
	id, err := strconv.ParseUint(s[i+1:], 10, 32)
	if err != nil {
		return topology.FabricDomain{}, fmt.Errorf("%w: fabric domain %q: clique id: %v", topology.ErrParse, s, err)
	}
	return topology.FabricDomain{ClusterUUID: s[:i], CliqueID: uint32(id)}, nil
}
