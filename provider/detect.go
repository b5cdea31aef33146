package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// Attempt records what one provider said during [Detect].
type Attempt struct {
	// Provider is the provider's name.
	Provider string
	// Err is why the provider did not answer; nil for the one that did.
	Err error
}

// Report says which provider answered [Detect] and why each one before it
// did not.
type Report struct {
	// Chosen is the name of the provider that answered, "" when none did.
	Chosen string
	// Attempts lists every provider tried, in order.
	Attempts []Attempt
}

// String renders the report one provider per line.
func (r Report) String() string {
	var b strings.Builder
	for _, a := range r.Attempts {
		if a.Err == nil {
			fmt.Fprintf(&b, "%s: detected\n", a.Provider)
		} else {
			fmt.Fprintf(&b, "%s: %v\n", a.Provider, a.Err)
		}
	}
	return b.String()
}

// DefaultProviders returns the hardware providers [Detect] tries when given
// none, in order.
func DefaultProviders() []TopologyProvider {
	return nil
}

// Detect tries the providers in order (the [DefaultProviders] when none are
// given) and returns the first node discovered. A provider failing with
// [ErrNotDetected] is skipped; any other error is also recorded and the
// next provider tried, so one broken driver does not hide another vendor's
// devices. When none answers, the error wraps ErrNotDetected and the
// report says why each failed.
func Detect(ctx context.Context, providers ...TopologyProvider) (*topology.Node, Report, error) {
	if len(providers) == 0 {
		providers = DefaultProviders()
	}
	var rep Report
	var errs []error
	for _, p := range providers {
		if err := ctx.Err(); err != nil {
			return nil, rep, err
		}
		n, err := p.Discover(ctx)
		if err == nil && n == nil {
			err = fmt.Errorf("%w: provider returned no topology", ErrNotDetected)
		}
		rep.Attempts = append(rep.Attempts, Attempt{Provider: p.Name(), Err: err})
		if err == nil {
			rep.Chosen = p.Name()
			return n, rep, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
	}
	if len(providers) == 0 {
		return nil, rep, fmt.Errorf("%w: no hardware providers are built into this binary", ErrNotDetected)
	}
	return nil, rep, fmt.Errorf("%w: %w", ErrNotDetected, errors.Join(errs...))
}
