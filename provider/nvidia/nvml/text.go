package nvml

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// Text forms of the enums the inventory carries. A named value is written
// as its String; any other as "<kind>(<number>)", so that every value
// round-trips. UnmarshalText accepts both (names case-insensitively) and
// wraps topology.ErrParse otherwise.

// MarshalText implements encoding.TextMarshaler: the architecture's name
// ("hopper"), or "arch(<n>)".
func (a Architecture) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what
// MarshalText writes.
func (a *Architecture) UnmarshalText(b []byte) error {
	v, err := parseEnum(string(b), "an architecture", "arch", archNames, 32)
	if err == nil {
		*a = v
	}
	return err
}

var nvlinkDeviceNames = map[NVLinkDeviceType]string{
	NVLinkDeviceGPU: "gpu", NVLinkDeviceIBMNPU: "ibmnpu", NVLinkDeviceSwitch: "switch", NVLinkDeviceUnknown: "unknown",
}

// MarshalText implements encoding.TextMarshaler: "gpu", "ibmnpu",
// "switch", "unknown" (255), or "nvlinkdevice(<n>)" for any other value.
func (t NVLinkDeviceType) MarshalText() ([]byte, error) {
	return []byte(enumText(t, "nvlinkdevice", nvlinkDeviceNames)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what
// MarshalText writes.
func (t *NVLinkDeviceType) UnmarshalText(b []byte) error {
	v, err := parseEnum(string(b), "an NVLink device type", "nvlinkdevice", nvlinkDeviceNames, strconv.IntSize)
	if err == nil {
		*t = v
	}
	return err
}

var p2pStatusNames = map[P2PStatus]string{
	P2POK: "ok", P2PChipsetNotSupported: "chipset not supported", P2PGPUNotSupported: "GPU not supported",
	P2PIOHTopologyNotSupported: "IOH topology not supported", P2PDisabledByRegkey: "disabled by regkey",
	P2PNotSupported: "not supported", P2PUnknown: "unknown",
}

// MarshalText implements encoding.TextMarshaler: the status's String
// ("ok", "not supported", ...), "unknown" for P2PUnknown, or
// "p2pstatus(<n>)" for any other value.
func (s P2PStatus) MarshalText() ([]byte, error) {
	return []byte(enumText(s, "p2pstatus", p2pStatusNames)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what
// MarshalText writes.
func (s *P2PStatus) UnmarshalText(b []byte) error {
	v, err := parseEnum(string(b), "a P2P status", "p2pstatus", p2pStatusNames, strconv.IntSize)
	if err == nil {
		*s = v
	}
	return err
}

var fabricStateNames = map[FabricState]string{
	FabricNotSupported: "not supported", FabricNotStarted: "not started", FabricInProgress: "in progress", FabricCompleted: "completed",
}

// MarshalText implements encoding.TextMarshaler: the state's name, or
// "state(<n>)".
func (s FabricState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts what
// MarshalText writes.
func (s *FabricState) UnmarshalText(b []byte) error {
	v, err := parseEnum(string(b), "a fabric state", "state", fabricStateNames, 8)
	if err == nil {
		*s = v
	}
	return err
}

type enum interface {
	~int | ~uint8 | ~uint32
}

// enumText is v's name, or "<kind>(<n>)".
func enumText[T enum](v T, kind string, names map[T]string) string {
	if s, ok := names[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// parseEnum reads a name of names (case-insensitively) or "<kind>(<n>)"
// with n fitting bits bits (unsigned for the unsigned types).
func parseEnum[T enum](s, what, kind string, names map[T]string, bits int) (T, error) {
	for v, n := range names {
		if strings.EqualFold(s, n) {
			return v, nil
		}
	}
	if num, ok := strings.CutPrefix(s, kind+"("); ok {
		if num, ok = strings.CutSuffix(num, ")"); ok {
			var zero T
			if signed := zero-1 < zero; signed {
				if n, err := strconv.ParseInt(num, 10, bits); err == nil {
					return T(n), nil
				}
			} else if n, err := strconv.ParseUint(num, 10, bits); err == nil {
				return T(n), nil
			}
		}
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return 0, fmt.Errorf("%w: nvidia: %q is not %s", topology.ErrParse, s, what)
}
