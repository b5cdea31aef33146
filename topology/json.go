package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SchemaV1 is the schema tag of the JSON form [Node.MarshalJSON] writes.
const SchemaV1 = "gputopo/v1"

// maxJSONBytes bounds what ParseJSON reads (a 1,024-device node with every
// pair listed is well under this).
const maxJSONBytes = 64 << 20

// document is the versioned JSON form of a Node. Links appear once per
// unordered pair (a < b), which is exact because built nodes are symmetric.
type document struct {
	Schema        string        `json:"schema"`
	Name          string        `json:"name,omitempty"`
	Fabric        *FabricDomain `json:"fabric,omitempty"`
	Devices       []jsonDevice  `json:"devices"`
	Links         []jsonLink    `json:"links"`
	NICs          []jsonNIC     `json:"nics,omitempty"`
	NICLinks      []jsonNICLink `json:"nicLinks,omitempty"`
	NUMADistances [][]int       `json:"numaDistances,omitempty"`
}

// jsonDevice is Device with NUMA optional on input (absent means unknown).
type jsonDevice struct {
	Index        int           `json:"index"`
	ID           string        `json:"id,omitempty"`
	PCI          PCIAddress    `json:"pci,omitzero"`
	Vendor       Vendor        `json:"vendor,omitzero"`
	Model        string        `json:"model,omitempty"`
	MemoryBytes  uint64        `json:"memoryBytes,omitempty"`
	NUMA         *int          `json:"numa,omitempty"`
	CPUs         CPUSet        `json:"cpus,omitzero"`
	Health       Health        `json:"health,omitzero"`
	HealthReason string        `json:"healthReason,omitempty"`
	Package      string        `json:"package,omitempty"`
	Partition    *Partitioning `json:"partition,omitempty"`
}

type jsonLink struct {
	A int `json:"a"`
	B int `json:"b"`
	Link
}

type jsonNIC struct {
	Name      string     `json:"name"`
	Device    string     `json:"device,omitempty"`
	PCI       PCIAddress `json:"pci,omitzero"`
	NUMA      *int       `json:"numa,omitempty"`
	SpeedMbps uint64     `json:"speedMbps,omitempty"`
}

type jsonNICLink struct {
	Device int      `json:"device"`
	NIC    int      `json:"nic"`
	Kind   LinkKind `json:"kind"`
}

func intPtrUnlessUnknown(v int) *int {
	if v == -1 {
		return nil
	}
	return &v
}

func (n *Node) document() document {
	doc := document{Schema: SchemaV1, Name: n.name, NUMADistances: n.NUMADistances()}
	if !n.fabric.IsZero() {
		f := n.fabric
		doc.Fabric = &f
	}
	doc.Devices = make([]jsonDevice, len(n.devices))
	for i, d := range n.devices {
		jd := jsonDevice{Index: d.Index, ID: d.ID, PCI: d.PCI, Vendor: d.Vendor, Model: d.Model,
			MemoryBytes: d.MemoryBytes, NUMA: intPtrUnlessUnknown(d.NUMA), CPUs: d.CPUs, Health: d.Health,
			HealthReason: d.HealthReason, Package: d.Package}
		if !d.Partition.equal(Partitioning{}) {
			p := d.Partition.clone()
			jd.Partition = &p
		}
		doc.Devices[i] = jd
	}
	size := len(n.devices)
	doc.Links = make([]jsonLink, 0, size*(size-1)/2)
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			doc.Links = append(doc.Links, jsonLink{A: i, B: j, Link: n.links[i*size+j]})
		}
	}
	for _, nic := range n.nics {
		doc.NICs = append(doc.NICs, jsonNIC{Name: nic.Name, Device: nic.Device, PCI: nic.PCI,
			NUMA: intPtrUnlessUnknown(nic.NUMA), SpeedMbps: nic.SpeedMbps})
	}
	for d := 0; d < size; d++ {
		for k := range n.nics {
			if kind := n.nicLinks[d*len(n.nics)+k]; kind != LinkNone {
				doc.NICLinks = append(doc.NICLinks, jsonNICLink{Device: d, NIC: k, Kind: kind})
			}
		}
	}
	return doc
}

func marshalDocument(doc document) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalJSON encodes the node in the versioned JSON schema [SchemaV1]:
// devices, one link per unordered pair, NICs, NIC links, NUMA distances and
// the fabric domain. The output is canonical (indented, fields in a fixed
// order), so [ParseJSON] followed by MarshalJSON reproduces it byte for byte.
func (n *Node) MarshalJSON() ([]byte, error) { return marshalDocument(n.document()) }

// ParseJSON decodes a node written by [Node.MarshalJSON] and validates it
// like a strict [Builder]. Unknown fields are rejected, so a typo is an
// error rather than a silently ignored setting.
func ParseJSON(data []byte) (*Node, error) {
	return parseJSON(bytes.NewReader(data), false)
}

// ReadJSON is [ParseJSON] from a reader (at most 64 MiB is read).
func ReadJSON(r io.Reader) (*Node, error) {
	return parseJSON(io.LimitReader(r, maxJSONBytes), false)
}

// ParseJSONLenient is [ParseJSON] with a lenient builder (see
// [Builder.SetLenient]); what it repaired is in [Node.Warnings].
func ParseJSONLenient(data []byte) (*Node, error) {
	return parseJSON(bytes.NewReader(data), true)
}

func parseJSON(r io.Reader, lenient bool) (*Node, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	// Check the schema first, so that a document of another schema (say the
	// gpu-topology/v1 reference files) is named as such rather than
	// rejected for its first unknown field.
	var head struct {
		Schema *string `json:"schema"`
	}
	if json.Unmarshal(data, &head) == nil && head.Schema != nil && *head.Schema != SchemaV1 {
		return nil, fmt.Errorf("%w: %q (this version reads %q)", ErrUnsupportedSchema, *head.Schema, SchemaV1)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, fmt.Errorf("%w: JSON syntax at byte %d: %v", ErrParse, syn.Offset, err)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("%w: JSON field %q: %v", ErrParse, typ.Field, err)
		case errors.Is(err, ErrParse), errors.Is(err, ErrInvalidTopology), errors.Is(err, ErrBadPCIAddress), errors.Is(err, ErrBadCPUList):
			return nil, fmt.Errorf("%w: %w", ErrParse, err)
		}
		return nil, fmt.Errorf("%w: JSON: %v", ErrParse, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON document", ErrParse)
	}
	if doc.Schema != SchemaV1 {
		return nil, fmt.Errorf("%w: %q (this version reads %q)", ErrUnsupportedSchema, doc.Schema, SchemaV1)
	}
	b := NewBuilder().SetName(doc.Name).SetLenient(lenient)
	if doc.Fabric != nil {
		b.SetFabric(*doc.Fabric)
	}
	for _, jd := range doc.Devices {
		d := Device{Index: jd.Index, ID: jd.ID, PCI: jd.PCI, Vendor: jd.Vendor, Model: jd.Model,
			MemoryBytes: jd.MemoryBytes, NUMA: -1, CPUs: jd.CPUs, Health: jd.Health,
			HealthReason: jd.HealthReason, Package: jd.Package}
		if jd.NUMA != nil {
			d.NUMA = *jd.NUMA
		}
		if jd.Partition != nil {
			d.Partition = *jd.Partition
		}
		b.AddDevice(d)
	}
	seen := make(map[[2]int]bool, len(doc.Links))
	for i, l := range doc.Links {
		key := [2]int{min(l.A, l.B), max(l.A, l.B)}
		if seen[key] {
			return nil, fmt.Errorf("%w: links[%d]: devices %d and %d listed twice", ErrParse, i, key[0], key[1])
		}
		seen[key] = true
		if l.Kind == LinkNone && l.Bandwidth == 0 && l.Lanes == 0 && l.PCIe == LinkNone {
			b.SetLinkPair(l.A, l.B, Link{})
			continue
		}
		b.SetLinkPair(l.A, l.B, l.Link)
	}
	for _, nic := range doc.NICs {
		v := NIC{Name: nic.Name, Device: nic.Device, PCI: nic.PCI, NUMA: -1, SpeedMbps: nic.SpeedMbps}
		if nic.NUMA != nil {
			v.NUMA = *nic.NUMA
		}
		b.AddNIC(v)
	}
	for _, nl := range doc.NICLinks {
		b.SetNICLink(nl.Device, nl.NIC, nl.Kind)
	}
	if doc.NUMADistances != nil {
		b.SetNUMADistances(doc.NUMADistances)
	}
	return b.Build()
}
