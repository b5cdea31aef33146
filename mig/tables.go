package mig

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gputopo/gputopo/topology"
)

// The shipped profile tables, written from ../shared/docs/facts-partitions.md
// §1.3 (real `nvidia-smi mig -lgip/-lgipp` captures and NVIDIA's
// supported-profiles pages), live in tables.txt: one "model" line per GPU
// model (name, slots, aliases, PCI device IDs), "#" lines for the sources
// and what is inferred ([V] verified, [I] inferred, [U] unverified), and
// one line per profile: name, profile ID, compute slices, memory slices,
// SMs, MiB, instance limit, decoders, JPEG engines, OFA engines, copy
// engines and placements as size:start,start,... A 0 means unknown. They
// are fallbacks and test fixtures: tables the NVIDIA provider discovers
// through NVML take precedence (Catalog.With).
//
//go:embed tables.txt
var shippedTables string

// shippedSpecs parses tables.txt. The file ships with the package, so a
// malformed line is a bug (ErrInternal), caught by the package's tests.
func shippedSpecs() []ModelSpec {
	specs, err := parseTables(shippedTables)
	if err != nil {
		panic(fmt.Errorf("mig: %w: tables.txt: %w", topology.ErrInternal, err))
	}
	return specs
}

// parseTables reads the tables.txt format.
func parseTables(text string) ([]ModelSpec, error) {
	var specs []ModelSpec
	for n, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] == "model" {
			s, err := parseModelLine(f[1:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			specs = append(specs, s)
			continue
		}
		if len(specs) == 0 {
			return nil, fmt.Errorf("line %d: a profile before any model", n+1)
		}
		p, err := parseProfileLine(f)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		last := &specs[len(specs)-1]
		last.Profiles = append(last.Profiles, p)
	}
	return specs, nil
}

func parseModelLine(f []string) (ModelSpec, error) {
	if len(f) == 0 {
		return ModelSpec{}, fmt.Errorf("model without a name")
	}
	s := ModelSpec{Name: f[0], Source: "shipped"}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "slots":
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("slots %q: %w", v, err)
			}
			s.Slots = n
		case "aliases":
			s.Aliases = strings.Split(v, ",")
		case "pci":
			for _, id := range strings.Split(v, ",") {
				x, err := strconv.ParseUint(id, 0, 32)
				if err != nil {
					return s, fmt.Errorf("PCI device ID %q: %w", id, err)
				}
				s.PCIDeviceIDs = append(s.PCIDeviceIDs, uint32(x))
			}
		default:
			return s, fmt.Errorf("unknown model field %q", k)
		}
	}
	return s, nil
}

func parseProfileLine(f []string) (Profile, error) {
	if len(f) != 12 {
		return Profile{}, fmt.Errorf("profile line with %d fields, want 12", len(f))
	}
	name, err := ParseProfileName(f[0])
	if err != nil {
		return Profile{}, err
	}
	var v [10]int
	for i := range v {
		if v[i], err = strconv.Atoi(f[1+i]); err != nil {
			return Profile{}, fmt.Errorf("profile %s field %d: %w", f[0], i+2, err)
		}
	}
	size, starts, ok := strings.Cut(f[11], ":")
	sz, err := strconv.Atoi(size)
	if !ok || err != nil {
		return Profile{}, fmt.Errorf("profile %s: placements %q, want size:start,start", f[0], f[11])
	}
	var pls []Placement
	for _, st := range strings.Split(starts, ",") {
		x, err := strconv.Atoi(st)
		if err != nil {
			return Profile{}, fmt.Errorf("profile %s: placement start %q: %w", f[0], st, err)
		}
		pls = append(pls, Placement{Start: x, Size: sz})
	}
	return Profile{
		Name: name, ID: v[0], ComputeSlices: v[1], MemorySlices: v[2], Multiprocessors: v[3],
		MemoryMiB: uint64(v[4]), MaxInstances: v[5], Decoders: v[6], JPEGEngines: v[7],
		OFAEngines: v[8], CopyEngines: v[9], Placements: pls,
	}, nil
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
)

// DefaultCatalog returns the catalog of shipped tables: A100-40GB,
// A100-80GB, A30-24GB, H100-80GB, H100-94GB, GH200-96GB, H200-141GB and
// B200-180GB. Combine it with discovered tables through Catalog.With.
func DefaultCatalog() *Catalog {
	defaultOnce.Do(func() {
		var ms []*Model
		for _, s := range shippedSpecs() {
			ms = append(ms, mustNewModel(s))
		}
		defaultCat = NewCatalog(ms...)
	})
	return defaultCat
}
