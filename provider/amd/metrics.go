package amd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/provider/internal/sysfile"
	"github.com/gputopo/gputopo/topology"
)

// Metrics is what amdgpu sysfs reports about one physical GPU now. Each
// reading is left unknown (HasVRAM false, BusyPercent nil, no entry in
// Temperatures) when its file is missing, unreadable or implausible; the
// last two cases are listed in Warnings.
type Metrics struct {
	// PCI is the physical GPU's address the metrics were read at.
	PCI topology.PCIAddress
	// HasVRAM says VRAMUsed and VRAMTotal (bytes, mem_info_vram_used and
	// mem_info_vram_total) were read.
	HasVRAM             bool
	VRAMUsed, VRAMTotal uint64
	// BusyPercent is gpu_busy_percent: the share of time the GPU was busy
	// over the driver's last sample period, 0..100.
	BusyPercent *int
	// Temperatures are the GPU's hwmon temperature sensors in degrees
	// Celsius (temp<N>_input, millidegrees in sysfs), by sensor label
	// (temp<N>_label: "edge", "junction", "mem"; "temp<N>" when the
	// sensor has no label).
	Temperatures map[string]float64
	// Warnings lists the files that could not be read or parsed, or held
	// implausible values.
	Warnings []string
}

// Bounds of a metrics read.
const (
	// maxHwmons bounds the hwmon directories read per GPU (amdgpu has one).
	maxHwmons = 8
	// maxTempSensors bounds the temperature sensors read per GPU (amdgpu
	// has up to three: edge, junction, mem).
	maxTempSensors = 32
	// Plausible temperatures, in degrees Celsius.
	minTempC, maxTempC = -40, 200
)

// ReadMetrics reads the live metrics of the physical GPU at addr (a
// Device's PhysicalPCI) from the amdgpu files of its PCI function,
// <root>/sys/bus/pci/devices/<addr>/: mem_info_vram_used,
// mem_info_vram_total, gpu_busy_percent and hwmon/hwmon*/temp*_input with
// their temp*_label. Files are read through the same bounded,
// regular-files-only reader as Scan. On a partitioned GPU (CPX, DPX, ...)
// the readings are those of the whole physical GPU. Errors wrap
// [ErrNotDetected] (no PCI function at addr) or are the context's; a
// missing or malformed metric file is not an error.
func (p *Provider) ReadMetrics(ctx context.Context, addr topology.PCIAddress) (*Metrics, error) {
	if err := p.usable(); err != nil {
		return nil, err
	}
	return readMetrics(ctx, p.fsys, addr)
}

func readMetrics(ctx context.Context, fsys fs.FS, addr topology.PCIAddress) (*Metrics, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !addr.IsValid() {
		return nil, fmt.Errorf("%w: no PCI address", ErrNotDetected)
	}
	dir := sysfile.Join("sys", "bus", "pci", "devices", addr.String())
	if _, err := sysfile.Stat(ctx, fsys, dir); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: PCI function %s: %w", ErrNotDetected, addr, err)
	}
	m := &Metrics{PCI: addr}
	warn := func(format string, args ...any) { m.Warnings = append(m.Warnings, fmt.Sprintf(format, args...)) }
	// read returns a file's trimmed content; ok is false when it is missing
	// (silently) or unreadable (with a warning).
	read := func(name string) (string, bool) {
		b, err := sysfile.ReadFile(ctx, fsys, name)
		switch {
		case err == nil:
			return strings.TrimSpace(string(b)), true
		case errors.Is(err, fs.ErrNotExist) || ctx.Err() != nil:
		default:
			warn("%s: %v", sysfile.Path(fsys, name), err)
		}
		return "", false
	}
	readUint := func(name string) (uint64, bool) {
		s, ok := read(sysfile.Join(dir, name))
		if !ok {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			warn("%s: %q is not a count", name, s)
			return 0, false
		}
		return v, true
	}
	used, okU := readUint("mem_info_vram_used")
	total, okT := readUint("mem_info_vram_total")
	switch {
	case okU && okT && total > 0 && used <= total:
		m.HasVRAM, m.VRAMUsed, m.VRAMTotal = true, used, total
	case okU && okT:
		warn("VRAM used %d of %d bytes is implausible; dropped", used, total)
	}
	if b, ok := readUint("gpu_busy_percent"); ok {
		if b <= 100 {
			v := int(b)
			m.BusyPercent = &v
		} else {
			warn("gpu_busy_percent %d is over 100; dropped", b)
		}
	}
	if err := readTemps(ctx, fsys, dir, m, read, warn); err != nil {
		return nil, err
	}
	return m, ctx.Err()
}

// readTemps reads the temperature sensors of every hwmon directory of the
// PCI function dir into m.Temperatures.
func readTemps(ctx context.Context, fsys fs.FS, dir string, m *Metrics, read func(string) (string, bool), warn func(string, ...any)) error {
	hw := sysfile.Join(dir, "hwmon")
	ents, err := sysfile.ReadDir(ctx, fsys, hw)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		warn("%s: %v", sysfile.Path(fsys, hw), err)
		return nil
	}
	var hwmons []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "hwmon") {
			hwmons = append(hwmons, e.Name())
		}
	}
	sort.Strings(hwmons)
	if len(hwmons) > maxHwmons {
		warn("%d hwmon directories; reading the first %d", len(hwmons), maxHwmons)
		hwmons = hwmons[:maxHwmons]
	}
	sensors := 0
	for _, h := range hwmons {
		hdir := sysfile.Join(hw, h)
		ents, err := sysfile.ReadDir(ctx, fsys, hdir)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			warn("%s: %v", sysfile.Path(fsys, hdir), err)
			continue
		}
		var inputs []string
		for _, e := range ents {
			if n := e.Name(); strings.HasPrefix(n, "temp") && strings.HasSuffix(n, "_input") {
				inputs = append(inputs, n)
			}
		}
		sort.Strings(inputs)
		for _, in := range inputs {
			if sensors == maxTempSensors {
				warn("more than %d temperature sensors; the rest are not read", maxTempSensors)
				return nil
			}
			sensors++
			base := strings.TrimSuffix(in, "_input")
			s, ok := read(sysfile.Join(hdir, in))
			if !ok {
				continue
			}
			milli, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				warn("%s/%s: %q is not millidegrees", h, in, s)
				continue
			}
			c := float64(milli) / 1000
			if c < minTempC || c > maxTempC {
				warn("%s/%s: %g °C is implausible; dropped", h, in, c)
				continue
			}
			label, ok := read(sysfile.Join(hdir, base+"_label"))
			if !ok || label == "" {
				label = base
			}
			if len(hwmons) > 1 {
				label = h + "/" + label
			}
			if m.Temperatures == nil {
				m.Temperatures = map[string]float64{}
			}
			m.Temperatures[label] = c
		}
	}
	return nil
}
