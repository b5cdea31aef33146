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
	// LeastFreeCapacity fills the sub-domains with the least room for the
	// job's pods first, each as far as it goes (Kueue's LeastFreeCapacity
	// profile for pod sets without a topology request): the pods pack the
	// fullest nodes and leave the emptiest whole.
	LeastFreeCapacity
)

// String returns "bestfit", "balanced" or "leastfreecapacity".
func (s Strategy) String() string {
	switch s {
	case BestFit:
		return "bestfit"
	case Balanced:
		return "balanced"
	case LeastFreeCapacity:
		return "leastfreecapacity"
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
	case "leastfreecapacity", "least-free-capacity", "LeastFreeCapacity":
		return LeastFreeCapacity, nil
	}
	return 0, parseErr("unknown strategy %q (want bestfit, balanced or leastfreecapacity)", name)
}

// MarshalText implements encoding.TextMarshaler: the name String returns.
// An unknown value is an error wrapping ErrInvalidJob.
func (s Strategy) MarshalText() ([]byte, error) {
	if s > LeastFreeCapacity {
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
