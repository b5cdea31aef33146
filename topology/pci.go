package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// errBadPCIAddress is wrapped by every error [ParsePCIAddress] and
// [NewPCIAddress] return. It wraps [ErrParse].
var errBadPCIAddress = fmt.Errorf("topology: malformed PCI address: %w", ErrParse)

// PCIAddress is a PCI bus address (domain:bus:device.function), a small
// comparable value type usable as a map key, modelled on net/netip.Addr.
//
// The zero value means "unknown" and reports false from [PCIAddress.IsValid].
type PCIAddress struct {
	domain   uint32
	bus      uint8
	device   uint8 // 0..31
	function uint8 // 0..7
	valid    bool
}

// NewPCIAddress returns the address domain:bus:device.function. It returns an
// error wrapping [ErrParse] when device > 31 or function > 7.
func NewPCIAddress(domain uint32, bus, device, function uint8) (PCIAddress, error) {
	if device > 31 || function > 7 {
		return PCIAddress{}, fmt.Errorf("%w: device %d (max 31) function %d (max 7)", errBadPCIAddress, device, function)
	}
	return PCIAddress{domain: domain, bus: bus, device: device, function: function, valid: true}, nil
}

// ParsePCIAddress parses the forms printed by Linux sysfs, lspci, NVML and
// KFD: "0000:0c:00.0", "00000000:0C:00.0" (NVML's 8-digit domain) and
// "0c:00.0" (domain 0). Hex digits may be upper or lower case.
func ParsePCIAddress(s string) (PCIAddress, error) {
	bad := func(why string) (PCIAddress, error) {
		return PCIAddress{}, fmt.Errorf("%w: %q: %s", errBadPCIAddress, s, why)
	}
	rest := s
	var domain uint64
	if strings.Count(rest, ":") == 2 {
		i := strings.IndexByte(rest, ':')
		if i == 0 || i > 8 {
			return bad("domain must have 1 to 8 hex digits")
		}
		d, err := strconv.ParseUint(rest[:i], 16, 32)
		if err != nil {
			return bad("domain is not hex")
		}
		domain = d
		rest = rest[i+1:]
	} else if strings.Count(rest, ":") != 1 {
		return bad("want [domain:]bus:device.function")
	}
	i := strings.IndexByte(rest, ':')
	if i < 1 || i > 2 {
		return bad("bus must have 1 or 2 hex digits")
	}
	bus, err := strconv.ParseUint(rest[:i], 16, 8)
	if err != nil {
		return bad("bus is not hex")
	}
	rest = rest[i+1:]
	j := strings.IndexByte(rest, '.')
	if j < 1 || j > 2 || len(rest)-j-1 != 1 {
		return bad("want device.function")
	}
	dev, err := strconv.ParseUint(rest[:j], 16, 8)
	if err != nil || dev > 31 {
		return bad("device must be hex 00-1f")
	}
	fn, err := strconv.ParseUint(rest[j+1:], 16, 8)
	if err != nil || fn > 7 {
		return bad("function must be 0-7")
	}
	return PCIAddress{domain: uint32(domain), bus: uint8(bus), device: uint8(dev), function: uint8(fn), valid: true}, nil
}

// IsValid reports whether a is a parsed address rather than the zero value.
func (a PCIAddress) IsValid() bool { return a.valid }

// Domain returns the PCI domain (segment).
func (a PCIAddress) Domain() uint32 { return a.domain }

// Bus returns the bus number.
func (a PCIAddress) Bus() uint8 { return a.bus }

// Device returns the device (slot) number, 0..31.
func (a PCIAddress) Device() uint8 { return a.device }

// Function returns the function number, 0..7.
func (a PCIAddress) Function() uint8 { return a.function }

// String formats a as "dddd:bb:dd.f" in lower case, the sysfs form. The zero
// value formats as "".
func (a PCIAddress) String() string {
	if !a.valid {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function)
}

// Compare orders addresses by domain, bus, device and function; unknown
// addresses sort first. It returns -1, 0 or +1.
func (a PCIAddress) Compare(b PCIAddress) int {
	ka, kb := a.key(), b.key()
	switch {
	case ka < kb:
		return -1
	case ka > kb:
		return 1
	}
	return 0
}

func (a PCIAddress) key() uint64 {
	if !a.valid {
		return 0
	}
	return 1<<48 | uint64(a.domain)<<16 | uint64(a.bus)<<8 | uint64(a.device)<<3 | uint64(a.function)
}

// MarshalText implements encoding.TextMarshaler; the zero value encodes as "".
func (a PCIAddress) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; "" decodes to the zero value.
func (a *PCIAddress) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*a = PCIAddress{}
		return nil
	}
	p, err := ParsePCIAddress(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}
