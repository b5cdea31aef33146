package gangfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gputopo/gputopo/gang"
)

// CPU is a CPU quantity in thousandths of a core: "16", "500m", 2.5.
type CPU int64

// UnmarshalJSON implements json.Unmarshaler.
func (c *CPU) UnmarshalJSON(b []byte) error {
	v, err := quantity(b, true)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	*c = CPU(v)
	return nil
}

// MarshalJSON implements json.Marshaler ("500m").
func (c CPU) MarshalJSON() ([]byte, error) {
	return json.Marshal(strconv.FormatInt(int64(c), 10) + "m")
}

// Bytes is a memory quantity in bytes: "80Gi", "1G", 1024.
type Bytes uint64

// UnmarshalJSON implements json.Unmarshaler.
func (m *Bytes) UnmarshalJSON(b []byte) error {
	v, err := quantity(b, false)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if v < 0 {
		return parseErr("negative memory %s", b)
	}
	*m = Bytes(v)
	return nil
}

// MarshalJSON implements json.Marshaler (bytes as a number).
func (m Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(uint64(m)) }

// Duration is a time span: "90m", "2h" or seconds as a number.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return parseErr("duration %q: %v", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64)/1e9 {
		return parseErr("duration %s: want \"90m\" or seconds", b)
	}
	*d = Duration(time.Duration(f * float64(time.Second)))
	return nil
}

// MarshalJSON implements json.Marshaler ("1h30m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var suffixes = map[string]float64{
	"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
}

var errQuantity = errors.New("malformed quantity")

// quantity parses a Kubernetes-style quantity from JSON (a string or a
// number). cpu returns thousandths ("500m" = 500, "2" = 2000).
func quantity(b []byte, cpu bool) (int64, error) {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return 0, fmt.Errorf("%w: %w: %s", gang.ErrParse, errQuantity, b)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: %w: empty", gang.ErrParse, errQuantity)
	}
	num := s
	mult := 1.0
	if cpu && strings.HasSuffix(s, "m") {
		num, mult = s[:len(s)-1], 1e-3
	} else {
		for suf, m := range suffixes {
			if suf != "" && strings.HasSuffix(s, suf) && len(suf) > len(s)-len(num) {
				num, mult = s[:len(s)-len(suf)], m
			}
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%w: %w: %q", gang.ErrParse, errQuantity, s)
	}
	v := f * mult
	if cpu {
		v *= 1000
	}
	if cpu && v > gang.MaxCPUMilli {
		return 0, limitErr("cpu %q is more than gang.MaxCPUMilli (%d thousandths of a core)", s, int64(gang.MaxCPUMilli))
	}
	if !cpu && v > gang.MaxBytes {
		return 0, limitErr("%q is more than gang.MaxBytes (%d)", s, int64(gang.MaxBytes))
	}
	return int64(math.Ceil(v - 1e-9)), nil
}
