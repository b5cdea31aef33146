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

// ParseStrategy parses a name String returns.
func ParseStrategy(name string) (Strategy, error) {
	switch name {
	case "bestfit", "best-fit", "BestFit":
		return BestFit, nil
	case "balanced", "Balanced":
		return Balanced, nil
	}
	return 0, fmt.Errorf("%w: unknown strategy %q (want bestfit or balanced)", ErrInvalidJob, name)
}
