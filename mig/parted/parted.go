package parted

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/topology"
)

// Version is the configuration file version this package reads and
// writes.
const Version = "v1"

// LabelConfig is the node label that names the mig-parted configuration
// the GPU Operator's MIG manager applies to the node.
const LabelConfig = "nvidia.com/mig.config"

// Limits on what [Parse] accepts (the Limits table of the package
// documentation); input beyond one fails with an error wrapping
// [mig.ErrParse] and [topology.ErrLimit].
const (
	// maxConfigBytes bounds a configuration file (mig-parted's shipped
	// default is a few tens of kilobytes; the YAML library spends about
	// 200 bytes of memory per list element, so this bounds the parse to
	// tens of megabytes).
	maxConfigBytes = 256 << 10
	// maxConfigs bounds the named configurations in a file.
	maxConfigs = 1024
	// maxNameBytes bounds a configuration's name (as mig bounds names in
	// its layout and template files).
	maxNameBytes = 256
	// maxDeviceEntries bounds one entry's mig-devices (at most one entry
	// per memory slot of a GPU).
	maxDeviceEntries = mig.MaxSlots
	// maxEntries bounds one configuration's entries.
	maxEntries = 64
	// maxFilterIDs bounds one entry's device-filter IDs.
	maxFilterIDs = 64
	// maxDeviceIndex is one more than the largest device index an entry
	// may name; it also bounds how many indices an entry lists.
	maxDeviceIndex = 64
	// maxCount bounds one profile's count in mig-devices.
	maxCount = mig.MaxSlots
)

// Config is a mig-parted configuration file.
type Config struct {
	// Version is the file version ([Version]).
	Version string
	// Configs are the named configurations, in file order.
	Configs []Named
}

// Named is one named configuration: what each GPU gets, by entry.
type Named struct {
	// Name names the configuration (the value of [LabelConfig]).
	Name string
	// Entries apply in order; a GPU takes every entry it matches.
	Entries []Entry
}

// Entry is one element of a configuration's list.
type Entry struct {
	// DeviceFilter lists the PCI device IDs the entry applies to, in
	// NVML's form (0x20B510DE: device 0x20B5 of vendor 0x10DE); nil means
	// every device.
	DeviceFilter []uint32
	// Devices lists the GPU indices the entry applies to; nil means
	// "all".
	Devices []int
	// MigEnabled is the MIG mode the entry sets.
	MigEnabled bool
	// MigDevices are the instances each matched GPU gets, as counts per
	// profile, in file order.
	MigDevices []mig.TemplateEntry
}

// entryYAML is an entry as the YAML library decodes it.
type entryYAML struct {
	DeviceFilter any           `yaml:"device-filter,omitempty"`
	Devices      any           `yaml:"devices"`
	MigEnabled   bool          `yaml:"mig-enabled"`
	MigDevices   yaml.MapSlice `yaml:"mig-devices,omitempty"`
}

type fileYAML struct {
	Version    string      `yaml:"version"`
	MigConfigs configsYAML `yaml:"mig-configs"`
}

// configsYAML is mig-configs decoded twice from the one parsed document:
// once for the names in file order, once into typed entries (strictly:
// the callback keeps the decoder's mode).
type configsYAML struct {
	names   []any
	entries map[string][]entryYAML
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *configsYAML) UnmarshalYAML(unmarshal func(any) error) error {
	var ms yaml.MapSlice
	if err := unmarshal(&ms); err != nil {
		return err
	}
	if len(ms) > maxConfigs {
		return limitErr("%d configurations, more than parted limit maxConfigs (%d)", len(ms), maxConfigs)
	}
	for _, it := range ms {
		c.names = append(c.names, it.Key)
	}
	return unmarshal(&c.entries)
}

func parseErr(format string, args ...any) error {
	return fmt.Errorf("%w: parted: %s", mig.ErrParse, fmt.Sprintf(format, args...))
}

func limitErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: parted: %s", mig.ErrParse, topology.ErrLimit, fmt.Sprintf(format, args...))
}

// Read is [Parse] from a reader: at most maxConfigBytes+1 bytes (256 KiB
// and one) are read.
func Read(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, parseErr("nil reader")
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("parted: reading: %w", err)
	}
	return Parse(data)
}

// Parse decodes a mig-parted configuration file (YAML 1.1; unknown fields
// and duplicate keys are errors). It checks the form, not the profiles:
// device-filter is a string or a list of IDs ("0x20B510DE"), devices is
// "all" or a list of distinct indices below 64 (maxDeviceIndex), every
// count is between 1 and [mig.MaxSlots] (maxCount), profile names parse
// ([mig.ParseProfileName]), and an entry with MIG disabled lists no
// devices. Errors wrap [mig.ErrParse] (and [topology.ErrLimit] for a
// limit) and name the configuration at fault.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, limitErr("file has %d bytes, more than parted limit maxConfigBytes (%d)", len(data), maxConfigBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, parseErr("empty file")
	}
	var f fileYAML
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		if errors.Is(err, mig.ErrParse) { // our own, from configsYAML
			return nil, err
		}
		return nil, parseErr("%.300v", err)
	}
	if f.Version != Version {
		return nil, parseErr("version %s, want %q", short(f.Version), Version)
	}
	c := &Config{Version: f.Version}
	seen := map[string]bool{}
	for _, key := range f.MigConfigs.names {
		name, ok := key.(string)
		if !ok || name == "" {
			return nil, parseErr("configuration name %s is not a non-empty string", short(key))
		}
		if len(name) > maxNameBytes {
			return nil, limitErr("configuration name of %d bytes, more than parted limit maxNameBytes (%d)", len(name), maxNameBytes)
		}
		if seen[name] {
			return nil, parseErr("duplicate configuration %q", name)
		}
		seen[name] = true
		entries, err := parseEntries(name, f.MigConfigs.entries[name])
		if err != nil {
			return nil, err
		}
		c.Configs = append(c.Configs, Named{Name: name, Entries: entries})
	}
	return c, nil
}

// short formats a decoded YAML value for an error message, at most 40
// bytes.
func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// parseEntries checks one configuration's decoded entries.
func parseEntries(name string, list []entryYAML) ([]Entry, error) {
	if len(list) == 0 {
		return nil, parseErr("configuration %q: no entries", name)
	}
	if len(list) > maxEntries {
		return nil, limitErr("configuration %q: %d entries, more than parted limit maxEntries (%d)", name, len(list), maxEntries)
	}
	out := make([]Entry, 0, len(list))
	for k, ey := range list {
		at := fmt.Sprintf("configuration %q entry %d", name, k)
		var err error
		e := Entry{MigEnabled: ey.MigEnabled}
		if e.DeviceFilter, err = parseFilter(ey.DeviceFilter); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if e.Devices, err = parseDevices(ey.Devices); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if len(ey.MigDevices) > maxDeviceEntries {
			return nil, limitErr("%s: %d mig-devices, more than parted limit maxDeviceEntries (%d)", at, len(ey.MigDevices), maxDeviceEntries)
		}
		if !e.MigEnabled && len(ey.MigDevices) > 0 {
			return nil, parseErr("%s: mig-devices with mig-enabled false", at)
		}
		profiles := map[string]bool{}
		for _, md := range ey.MigDevices {
			ps, ok := md.Key.(string)
			if !ok {
				return nil, parseErr("%s: mig-devices key %s is not a profile name", at, short(md.Key))
			}
			p, err := mig.ParseProfileName(ps)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			if profiles[p.String()] {
				return nil, parseErr("%s: profile %s listed twice", at, p)
			}
			profiles[p.String()] = true
			n, ok := md.Value.(int)
			if !ok || n < 1 || n > maxCount {
				return nil, parseErr("%s: count of %s is %s, want an integer from 1 to %d", at, p, short(md.Value), maxCount)
			}
			e.MigDevices = append(e.MigDevices, mig.TemplateEntry{Profile: p, Count: n})
		}
		out = append(out, e)
	}
	return out, nil
}

// parseFilter reads device-filter: absent, one ID or a list of IDs.
func parseFilter(v any) ([]uint32, error) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		if len(x) == 0 {
			return nil, parseErr("empty device-filter")
		}
		items = x
	default:
		items = []any{x}
	}
	if len(items) > maxFilterIDs {
		return nil, limitErr("%d device-filter IDs, more than parted limit maxFilterIDs (%d)", len(items), maxFilterIDs)
	}
	out := make([]uint32, 0, len(items))
	for _, it := range items {
		var id uint64
		switch x := it.(type) {
		case string:
			s := strings.TrimPrefix(strings.TrimPrefix(x, "0x"), "0X")
			if s == x || len(s) == 0 || len(s) > 8 {
				return nil, parseErr("device-filter ID %s: want 0x and up to 8 hex digits", short(x))
			}
			var err error
			if id, err = strconv.ParseUint(s, 16, 32); err != nil {
				return nil, parseErr("device-filter ID %s: want 0x and up to 8 hex digits", short(x))
			}
		case int: // an unquoted 0x20B510DE is an integer in YAML 1.1
			if x < 0 || uint64(x) > 0xFFFFFFFF {
				return nil, parseErr("device-filter ID %d out of range", x)
			}
			id = uint64(x)
		default:
			return nil, parseErr("device-filter ID %s is not a string", short(it))
		}
		if !slices.Contains(out, uint32(id)) {
			out = append(out, uint32(id))
		}
	}
	return out, nil
}

// parseDevices reads devices: "all" or a list of indices.
func parseDevices(v any) ([]int, error) {
	switch x := v.(type) {
	case string:
		if x == "all" {
			return nil, nil
		}
	case []any:
		if len(x) == 0 {
			return nil, parseErr("empty devices list")
		}
		if len(x) > maxDeviceIndex {
			return nil, limitErr("%d devices, more than parted limit maxDeviceIndex (%d)", len(x), maxDeviceIndex)
		}
		out := make([]int, 0, len(x))
		for _, it := range x {
			i, ok := it.(int)
			if !ok || i < 0 || i >= maxDeviceIndex {
				return nil, parseErr("device index %s: want an integer from 0 to %d", short(it), maxDeviceIndex-1)
			}
			if slices.Contains(out, i) {
				return nil, parseErr("device index %d listed twice", i)
			}
			out = append(out, i)
		}
		return out, nil
	}
	return nil, parseErr(`devices %s: want "all" or a list of indices`, short(v))
}

// Marshal writes the configuration as YAML that [Parse] reads back to an
// equal Config (and mig-parted reads as the same configuration).
func (c *Config) Marshal() ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("parted: marshal a nil configuration: %w", topology.ErrInvalidRequest)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version: %s\nmig-configs:\n", Version)
	for _, n := range c.Configs {
		if n.Name == "" || len(n.Entries) == 0 {
			return nil, fmt.Errorf("parted: configuration %q: no name or no entries: %w", n.Name, topology.ErrInvalidRequest)
		}
		fmt.Fprintf(&b, "  %s:\n", strconv.Quote(n.Name))
		for _, e := range n.Entries {
			prefix := "  - "
			if len(e.DeviceFilter) > 0 {
				ids := make([]string, len(e.DeviceFilter))
				for i, id := range e.DeviceFilter {
					ids[i] = fmt.Sprintf("%q", fmt.Sprintf("0x%08X", id))
				}
				fmt.Fprintf(&b, "  %sdevice-filter: [%s]\n", prefix, strings.Join(ids, ", "))
				prefix = "    "
			}
			if e.Devices == nil {
				fmt.Fprintf(&b, "  %sdevices: all\n", prefix)
			} else {
				idx := make([]string, len(e.Devices))
				for i, d := range e.Devices {
					idx[i] = strconv.Itoa(d)
				}
				fmt.Fprintf(&b, "  %sdevices: [%s]\n", prefix, strings.Join(idx, ", "))
			}
			fmt.Fprintf(&b, "      mig-enabled: %t\n", e.MigEnabled)
			if len(e.MigDevices) > 0 {
				b.WriteString("      mig-devices:\n")
				for _, md := range e.MigDevices {
					fmt.Fprintf(&b, "        %q: %d\n", md.Profile.String(), md.Count)
				}
			}
		}
	}
	return []byte(b.String()), nil
}

// Skipped is a configuration [Config.Templates] did not turn into a
// template for a model, and why.
type Skipped struct {
	// Config names the configuration; Model the model ("" for every
	// model).
	Config, Model string
	// Reason says why it is not a template.
	Reason string
}

// String formats the record on one line.
func (s Skipped) String() string {
	if s.Model == "" {
		return fmt.Sprintf("%s: %s", s.Config, s.Reason)
	}
	return fmt.Sprintf("%s (%s): %s", s.Config, s.Model, s.Reason)
}

// Templates returns the configurations usable as templates, resolved
// against the models of cat (mig.DefaultCatalog when nil), in file order.
// A configuration is a template of model m when exactly one of its
// entries applies to m (its device-filter names one of m's PCI device
// IDs, or it has none), that entry covers all devices, enables MIG and
// lists instances that fit one GPU of m ([mig.Template.Validate]). An
// entry without a device-filter gives a template for every catalog model
// it validates on. Everything else (MIG disabled, per-index entries,
// several entries for one model, profiles the model lacks) is reported in
// skipped, never silently dropped. The templates carry the
// configuration's name, so [mig.TemplateChoice] names the configuration
// to select with [NodeLabels].
func (c *Config) Templates(cat *mig.Catalog) (templates []mig.Template, skipped []Skipped) {
	if cat == nil {
		cat = mig.DefaultCatalog()
	}
	if c == nil {
		return nil, nil
	}
	models := cat.Models()
	for _, n := range c.Configs {
		found := false
		for _, m := range models {
			var hit []Entry
			for _, e := range n.Entries {
				if e.DeviceFilter == nil || slices.ContainsFunc(m.PCIDeviceIDs(), func(id uint32) bool { return slices.Contains(e.DeviceFilter, id) }) {
					hit = append(hit, e)
				}
			}
			if len(hit) == 0 {
				continue
			}
			filtered := slices.ContainsFunc(hit, func(e Entry) bool { return e.DeviceFilter != nil })
			skip := func(reason string) {
				if filtered {
					skipped = append(skipped, Skipped{Config: n.Name, Model: m.Name(), Reason: reason})
				}
			}
			switch e := hit[0]; {
			case len(hit) > 1:
				skip(fmt.Sprintf("%d entries apply to the model; a template gives every GPU the same instances", len(hit)))
			case e.Devices != nil:
				skip("the entry names device indices; a template applies to all devices")
			case !e.MigEnabled:
				skip("MIG disabled")
			case len(e.MigDevices) == 0:
				skip("no mig-devices")
			default:
				t := mig.Template{Name: n.Name, Model: m.Name(), Purpose: "mig-parted", Profiles: slices.Clone(e.MigDevices)}
				if err := t.Validate(m); err != nil {
					skip(fmt.Sprintf("%.200v", err))
					continue
				}
				templates = append(templates, t)
				found = true
			}
		}
		if !found && !slices.ContainsFunc(skipped, func(s Skipped) bool { return s.Config == n.Name }) {
			skipped = append(skipped, Skipped{Config: n.Name, Reason: "no entry gives a template for any known model"})
		}
	}
	return templates, skipped
}

// FromTemplate writes template t, resolved on model m, as a mig-parted
// configuration of one named configuration: an entry for m's PCI device
// IDs (every device when m lists none) that enables MIG on all devices
// with t's instances. name names the configuration ("" means t.Name) and
// must be a valid label value ([NodeLabels]). A template that does not fit
// m fails with the error of [mig.Template.Validate].
func FromTemplate(name string, t mig.Template, m *mig.Model) (*Config, error) {
	if m == nil {
		return nil, fmt.Errorf("parted: no model: %w", topology.ErrInvalidRequest)
	}
	if name == "" {
		name = t.Name
	}
	if err := checkLabelValue(name); err != nil {
		return nil, err
	}
	if err := t.Validate(m); err != nil {
		return nil, fmt.Errorf("parted: template %q: %w", t.Name, err)
	}
	e := Entry{MigEnabled: true, DeviceFilter: m.PCIDeviceIDs(), MigDevices: slices.Clone(t.Profiles)}
	if len(e.DeviceFilter) == 0 {
		e.DeviceFilter = nil
	}
	return &Config{Version: Version, Configs: []Named{{Name: name, Entries: []Entry{e}}}}, nil
}

// NodeLabels returns the node labels that make the MIG manager apply the
// configuration name: {[LabelConfig]: name}. A name that is not a valid
// Kubernetes label value (at most 63 characters of [A-Za-z0-9._-],
// beginning and ending with a letter or digit) fails with an error
// wrapping [topology.ErrInvalidRequest].
func NodeLabels(name string) (map[string]string, error) {
	if err := checkLabelValue(name); err != nil {
		return nil, err
	}
	return map[string]string{LabelConfig: name}, nil
}

// ErrLabelValue reports a configuration name that cannot be a label value.
var ErrLabelValue = fmt.Errorf("parted: configuration name is not a label value: %w", topology.ErrInvalidRequest)

func checkLabelValue(v string) error {
	alnum := func(r byte) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	if v == "" || len(v) > 63 {
		return fmt.Errorf("%w: %d characters (1 to 63)", ErrLabelValue, len(v))
	}
	for i := 0; i < len(v); i++ {
		if !alnum(v[i]) && v[i] != '-' && v[i] != '_' && v[i] != '.' {
			return fmt.Errorf("%w: %q has character %q", ErrLabelValue, v, v[i])
		}
	}
	if !alnum(v[0]) || !alnum(v[len(v)-1]) {
		return fmt.Errorf("%w: %q must begin and end with a letter or digit", ErrLabelValue, v)
	}
	return nil
}
