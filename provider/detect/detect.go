// Package detect finds the GPUs of the machine it runs on: [Detect] tries
// the hardware providers in order (NVIDIA through NVML, AMD through KFD
// sysfs, then any PCI accelerator through sysfs) and reports why each one
// before the answer did not answer.
//
// It is a package of its own so that importing the provider interface
// (package provider) links no vendor library: importing detect links
// go-nvml (cgo, or its stub without cgo) and ghw.
package detect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gputopo/gputopo/provider"
	"github.com/gputopo/gputopo/provider/amd"
	"github.com/gputopo/gputopo/provider/internal/detecterr"
	"github.com/gputopo/gputopo/provider/nvidia"
	"github.com/gputopo/gputopo/provider/sysfs"
	"github.com/gputopo/gputopo/topology"
)

// Attempt records what one provider said during [Detect].
type Attempt struct {
	// Provider is the provider's name.
	Provider string
	// Err is why the provider did not answer; nil for the one that did.
	// It wraps [provider.ErrNotDetected] when the provider found nothing of its kind
	// here (see [Attempt.NotDetected]); any other error is a real failure.
	Err error
	// Notes qualify the answer of the provider that answered: what it
	// cannot see (from [provider.Annotator]) and what its node's builder repaired
	// (topology.Node.Warnings).
	Notes []string
}

// NotDetected reports whether the provider did not answer because it found
// nothing of its kind (no driver, no library, no devices).
func (a Attempt) NotDetected() bool { return a.Err != nil && errors.Is(a.Err, provider.ErrNotDetected) }

// Failed reports whether the provider did not answer for a real reason: it
// found its devices, driver or library but could not read them.
func (a Attempt) Failed() bool { return a.Err != nil && !errors.Is(a.Err, provider.ErrNotDetected) }

// Report says which provider answered [Detect] and why each one before it
// did not.
type Report struct {
	// Chosen is the name of the provider that answered, "" when none did.
	Chosen string
	// Attempts lists every provider tried, in order.
	Attempts []Attempt
}

// Degraded reports whether the provider that answered did so after another
// failed for a real reason: a vendor provider broke (a driver/library
// mismatch, a permission problem) and a less capable provider, typically
// the sysfs fallback, answered instead. The answer is then true but
// incomplete, and the failed attempt says why.
func (r Report) Degraded() bool {
	if r.Chosen == "" {
		return false
	}
	for _, a := range r.Attempts {
		if a.Failed() {
			return true
		}
	}
	return false
}

// String renders the report one provider per line ("detected", "not
// detected: ...", "failed: ..."), the chosen provider's notes indented
// below it, and a warning when the answer is [Report.Degraded].
func (r Report) String() string {
	var b strings.Builder
	for _, a := range r.Attempts {
		switch {
		case a.Err == nil:
			fmt.Fprintf(&b, "%s: detected\n", a.Provider)
		case a.NotDetected():
			fmt.Fprintf(&b, "%s: not detected: %v\n", a.Provider, a.Err)
		default:
			fmt.Fprintf(&b, "%s: failed: %v\n", a.Provider, a.Err)
		}
		for _, n := range a.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	if r.Degraded() {
		var failed []string
		for _, a := range r.Attempts {
			if a.Failed() {
				failed = append(failed, a.Provider)
			}
		}
		fmt.Fprintf(&b, "warning: %s answered because %s failed; its answer lacks what %s would have seen\n",
			r.Chosen, strings.Join(failed, " and "), strings.Join(failed, " and "))
	}
	return b.String()
}

// DefaultProviders returns the hardware providers [Detect] tries when given
// none, in order: NVIDIA (NVML), AMD (KFD sysfs), then the sysfs fallback
// for any PCI accelerator, each reading the live system.
func DefaultProviders() []provider.TopologyProvider {
	return []provider.TopologyProvider{nvidia.New(), amd.New(), sysfs.New()}
}

// notDetected marks a subpackage's "nothing here" error as provider.ErrNotDetected
// without changing its message.
type notDetected struct{ err error }

func (e notDetected) Error() string   { return e.err.Error() }
func (e notDetected) Unwrap() []error { return []error{provider.ErrNotDetected, e.err} }

// classify makes every "nothing of my kind here" error match
// provider.ErrNotDetected: the hardware subpackages cannot import this package (it
// imports them), so they wrap their own sentinels.
func classify(err error) error {
	if err == nil || errors.Is(err, provider.ErrNotDetected) {
		return err
	}
	if errors.Is(err, detecterr.ErrNotDetected) || errors.Is(err, nvidia.ErrNoNVML) || errors.Is(err, nvidia.ErrNoDevices) {
		return notDetected{err}
	}
	return err
}

// Detect tries the providers in order (the [DefaultProviders] when none are
// given) and returns the first node discovered. A provider that finds
// nothing of its kind ([provider.ErrNotDetected], or a subpackage's own "no NVML",
// "no KFD", "no accelerator" error) is skipped; any other error is also
// recorded and the next provider tried, so one broken driver does not hide
// another vendor's devices, and the report shows both (see
// [Report.Degraded]). A node of more than topology.MaxDevices devices is
// such an error (wrapping topology.ErrLimit). When none answers, the error
// wraps provider.ErrNotDetected and the report says why each failed.
func Detect(ctx context.Context, providers ...provider.TopologyProvider) (*topology.Node, Report, error) {
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
			err = fmt.Errorf("%w: provider returned no topology", provider.ErrNotDetected)
		}
		if err == nil && n.Len() > topology.MaxDevices {
			err = fmt.Errorf("provider returned %d devices, more than topology.MaxDevices (%d): %w", n.Len(), topology.MaxDevices, topology.ErrLimit)
		}
		err = classify(err)
		a := Attempt{Provider: p.Name(), Err: err}
		if err == nil {
			if an, ok := p.(provider.Annotator); ok {
				a.Notes = append(a.Notes, an.Notes(n)...)
			}
			a.Notes = append(a.Notes, n.Warnings()...)
			rep.Attempts = append(rep.Attempts, a)
			rep.Chosen = p.Name()
			return n, rep, nil
		}
		rep.Attempts = append(rep.Attempts, a)
		errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
	}
	if len(providers) == 0 {
		return nil, rep, fmt.Errorf("%w: no hardware providers are built into this binary", provider.ErrNotDetected)
	}
	return nil, rep, fmt.Errorf("%w: %w", provider.ErrNotDetected, errors.Join(errs...))
}
