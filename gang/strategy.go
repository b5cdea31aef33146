package gang

import "fmt"

// Strategy chooses how a gang spreads inside the domain that holds it.
// Either way the domain itself is the tightest that fits (BestFit).
type Strategy uint8

const (
	// BestFit fills the fullest sub-domains first and uses as few of them
	// as possible, taking the tightest one that fits for the last part
	// (Kueue's BestFit).
	BestFit Strategy = iota
	// Balanced uses as few sub-domains as BestFit but spreads the pods
	// evenly over them (Kueue's BalancedPlacement: 12 pods over two racks
	// of 10 free go 6 and 6, not 10 and 2).
	Balanced
)

// String returns "bestfit" or "balanced".
func (s Strategy) String() string {
	switch s {
	case BestFit:
		return "bestfit"
	case Balanced:
		return "balanced"
	}
	return fmt.Sprintf("Strategy(%d)", s)
}

// ParseStrategy parses a name String returns ("best-fit" and "BestFit",
// "Balanced" too). Errors wrap ErrParse.
func ParseStrategy(name string) (Strategy, error) {
	switch name {
	case "bestfit", "best-fit", "BestFit":
		return BestFit, nil
	case "balanced", "Balanced":
		return Balanced, nil
	}
	return 0, parseErr("unknown strategy %q (want bestfit or balanced)", name)
}

// MarshalText implements encoding.TextMarshaler: the name String returns.
// An unknown value is an error wrapping ErrInvalidJob.
func (s Strategy) MarshalText() ([]byte, error) {
	if s > Balanced {
		return nil, jobErr("unknown strategy %d", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseStrategy.
func (s *Strategy) UnmarshalText(b []byte) error {
	v, err := ParseStrategy(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
