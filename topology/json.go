package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// schemaV1 is the schema tag of the JSON form [Node.MarshalJSON] writes.
const schemaV1 = "gputopo/v1"

// document is the versioned JSON form of a Node. Links appear once per
// unordered pair (a < b), which is exact because built nodes are symmetric.
type document struct {
	Schema        string        `json:"schema"`
	Name          string        `json:"name,omitempty"`
	Fabric        *FabricDomain `json:"fabric,omitempty"`
	Devices       jsonDevices   `json:"devices"`
	Links         []jsonLink    `json:"links"`
	NICs          jsonNICs      `json:"nics,omitempty"`
	NICLinks      []jsonNICLink `json:"nicLinks,omitempty"`
	NUMADistances numaTable     `json:"numaDistances,omitempty"`
}

// The lists of a document decode element by element and stop at their
// limit, so a document declaring too many devices (or links, NICs, NUMA
// nodes) fails before the excess is allocated.
type (
	jsonDevices []jsonDevice
	jsonNICs    []jsonNIC
	numaTable   [][]int
	numaRow     []int
)

// inDocument is document as ParseJSON decodes it: the link lists stay raw
// until the device and NIC counts are known, so that they are decoded with
// a bound of one entry per pair (plus one, so that a surplus entry is
// reported precisely, as a duplicate or as a link too many).
type inDocument struct {
	Schema        string          `json:"schema"`
	Name          string          `json:"name,omitempty"`
	Fabric        *FabricDomain   `json:"fabric,omitempty"`
	Devices       jsonDevices     `json:"devices"`
	Links         json.RawMessage `json:"links"`
	NICs          jsonNICs        `json:"nics,omitempty"`
	NICLinks      json.RawMessage `json:"nicLinks,omitempty"`
	NUMADistances numaTable       `json:"numaDistances,omitempty"`
}

func (l *jsonDevices) UnmarshalJSON(b []byte) (err error) {
	*l, err = decodeList[jsonDevice](b, "devices", MaxDevices, "topology.MaxDevices")
	return err
}

func (l *jsonNICs) UnmarshalJSON(b []byte) (err error) {
	*l, err = decodeList[jsonNIC](b, "nics", maxNICs, "topology limit maxNICs")
	return err
}

func (t *numaTable) UnmarshalJSON(b []byte) error {
	rows, err := decodeList[numaRow](b, "numaDistances", maxNUMANodes, "topology limit maxNUMANodes")
	if err != nil || rows == nil {
		*t = nil
		return err
	}
	*t = make(numaTable, len(rows))
	for i, r := range rows {
		(*t)[i] = r
	}
	return nil
}

func (r *numaRow) UnmarshalJSON(b []byte) (err error) {
	*r, err = decodeList[int](b, "numaDistances row", maxNUMANodes, "topology limit maxNUMANodes")
	if err == nil && *r == nil {
		*r = []int{}
	}
	return err
}

// decodeList decodes the JSON array b element by element, refusing
// unknown object fields, and fails with an error wrapping ErrLimit as soon
// as it would hold more than max elements. null and nothing decode to nil.
func decodeList[T any](b []byte, what string, max int, limit string) ([]T, error) {
	if t := string(bytes.TrimSpace(b)); t == "null" || t == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("%w: JSON field %q: want an array", ErrParse, what)
	}
	out := []T{}
	for dec.More() {
		if len(out) >= max {
			return nil, fmt.Errorf("%w: JSON field %q has more than %d entries (%s)", ErrLimit, what, max, limit)
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", what, len(out), err)
		}
		out = append(out, v)
	}
	return out, nil
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
	doc := document{Schema: schemaV1, Name: n.name, NUMADistances: n.NUMADistances()}
	if !n.fabric.IsZero() {
		f := n.fabric
		doc.Fabric = &f
	}
	doc.Devices = make(jsonDevices, len(n.devices))
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
		// Builders validate every value the document holds.
		return nil, fmt.Errorf("%w: encoding a built node as JSON: %v", ErrInternal, err)
	}
	return buf.Bytes(), nil
}

// MarshalJSON encodes the node in the versioned JSON schema schemaV1:
// devices, one link per unordered pair, NICs, NIC links, NUMA distances and
// the fabric domain. The output is canonical (indented, fields in a fixed
// order), so [ParseJSON] followed by MarshalJSON reproduces it byte for byte.
func (n *Node) MarshalJSON() ([]byte, error) { return marshalDocument(n.or().document()) }

// ParseJSON decodes a node written by [Node.MarshalJSON] and validates it
// like a strict [Builder]. Unknown fields are rejected, so a typo is an
// error rather than a silently ignored setting. Errors wrap [ErrParse]
// (a document that does not validate also wraps [ErrInvalidTopology] and
// the Builder's specific sentinels), ErrParse for an unsupported schema tag, or [ErrLimit].
//
// A document over [MaxJSONBytes], or listing more than [MaxDevices]
// devices, maxNICs NICs or maxNUMANodes NUMA nodes, fails with an
// error wrapping [ErrLimit] before the excess is decoded; validation errors
// are capped at maxReportedProblems.
func ParseJSON(data []byte) (*Node, error) {
	return parseJSON(data, false)
}

// ParseJSONLenient is [ParseJSON] with a lenient builder (see
// [Builder.SetLenient]); what it repaired is in [Node.Warnings].
func ParseJSONLenient(data []byte) (*Node, error) {
	return parseJSON(data, true)
}

func parseJSON(data []byte, lenient bool) (*Node, error) {
	if len(data) > MaxJSONBytes {
		return nil, fmt.Errorf("%w: JSON document of more than %d bytes (topology.MaxJSONBytes)", ErrLimit, MaxJSONBytes)
	}
	// Check the schema first, so that a document of another schema (say the
	// gpu-topology/v1 reference files) is named as such rather than
	// rejected for its first unknown field.
	var head struct {
		Schema *string `json:"schema"`
	}
	if json.Unmarshal(data, &head) == nil && head.Schema != nil && *head.Schema != schemaV1 {
		return nil, fmt.Errorf("%w: %q (this version reads %q)", errUnsupportedSchema, *head.Schema, schemaV1)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc inDocument
	err := dec.Decode(&doc)
	size := len(doc.Devices)
	pairs := size * (size - 1) / 2
	var links []jsonLink
	var nicLinks []jsonNICLink
	if err == nil {
		links, err = decodeList[jsonLink](doc.Links, "links", pairs+1, fmt.Sprintf("one per pair of the %d devices", size))
	}
	if err == nil {
		nicLinks, err = decodeList[jsonNICLink](doc.NICLinks, "nicLinks", size*len(doc.NICs)+1, fmt.Sprintf("one per pair of the %d devices and %d NICs", size, len(doc.NICs)))
	}
	if err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, ErrLimit):
			return nil, fmt.Errorf("JSON document: %w", err)
		case errors.As(err, &syn):
			return nil, fmt.Errorf("%w: JSON syntax at byte %d: %v", ErrParse, syn.Offset, err)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("%w: JSON field %q: %v", ErrParse, typ.Field, err)
		case errors.Is(err, ErrParse):
			return nil, fmt.Errorf("JSON field %w", err)
		case errors.Is(err, ErrInvalidTopology):
			return nil, fmt.Errorf("%w: %w", ErrParse, err)
		}
		return nil, fmt.Errorf("%w: JSON: %v", ErrParse, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON document", ErrParse)
	}
	if doc.Schema != schemaV1 {
		return nil, fmt.Errorf("%w: %q (this version reads %q)", errUnsupportedSchema, doc.Schema, schemaV1)
	}
	if len(nicLinks) > size*len(doc.NICs) {
		return nil, fmt.Errorf("%w: %d NIC links listed, more than the %d device-NIC pairs", ErrParse, len(nicLinks), size*len(doc.NICs))
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
	for i, l := range links {
		if _, dup := b.links[[2]int{l.A, l.B}]; dup {
			return nil, fmt.Errorf("%w: links[%d]: devices %d and %d listed twice", ErrParse, i, min(l.A, l.B), max(l.A, l.B))
		}
		if i >= pairs {
			return nil, fmt.Errorf("%w: %d links listed, more than the %d pairs of %d devices", ErrParse, len(links), pairs, size)
		}
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
	for _, nl := range nicLinks {
		b.SetNICLink(nl.Device, nl.NIC, nl.Kind)
	}
	if doc.NUMADistances != nil {
		b.SetNUMADistances(doc.NUMADistances)
	}
	return buildParsed(b)
}

// buildParsed builds a node from parsed input: a topology that does not
// validate is malformed input, so its errors wrap ErrParse as well as
// ErrInvalidTopology and the specific sentinels.
func buildParsed(b *Builder) (*Node, error) {
	n, err := b.Build()
	if err != nil && !errors.Is(err, ErrLimit) {
		return nil, fmt.Errorf("%w: %w", ErrParse, err)
	}
	return n, err
}
