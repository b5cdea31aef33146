package plankit

import (
	"fmt"
	"slices"

	"github.com/gputopo/gputopo/internal/ctxpoll"
)

// MaxExamples bounds the example reasons a Log keeps per cause, so that a
// no-plan error stays small however large the fleet is.
const MaxExamples = 3

// Count is how many ways of making room were rejected for one cause (the
// fields of mig.CauseCount).
type Count[C any] struct {
	Cause C
	Count int
}

// Log collects rejection reasons bounded: counts per cause and at most
// MaxExamples examples each. The zero value is empty.
type Log[C comparable] struct {
	causes   []Count[C]
	examples []string
	perCause []int
	last     int
}

// Add counts one rejection for cause c and reports whether an example of
// it is wanted (then pass it to Example).
func (r *Log[C]) Add(c C) bool {
	i := slices.IndexFunc(r.causes, func(x Count[C]) bool { return x.Cause == c })
	if i < 0 {
		i = len(r.causes)
		r.causes = append(r.causes, Count[C]{Cause: c})
		r.perCause = append(r.perCause, 0)
	}
	r.causes[i].Count++
	r.last = i
	return r.perCause[i] < MaxExamples
}

// Example records an example for the cause last passed to Add.
func (r *Log[C]) Example(s string) {
	if r.perCause[r.last] >= MaxExamples || slices.Contains(r.examples, s) {
		return
	}
	r.perCause[r.last]++
	r.examples = append(r.examples, s)
}

// Note is Add and Example in one, for reasons that are cheap to format.
func (r *Log[C]) Note(c C, s string) {
	if r.Add(c) {
		r.Example(s)
	}
}

// Empty reports whether nothing was rejected.
func (r *Log[C]) Empty() bool { return len(r.causes) == 0 }

// Counts returns a copy of the counts per cause, in the order the causes
// were first met.
func (r *Log[C]) Counts() []Count[C] { return slices.Clone(r.causes) }

// Examples returns a copy of the examples, in the order they were noted.
func (r *Log[C]) Examples() []string { return slices.Clone(r.examples) }

// ValidateGPUs validates every GPU of a fleet with validate and rejects
// duplicate names with an error wrapping dup, looking at p as it goes.
func ValidateGPUs[G any](p *ctxpoll.Poller, gpus []G, name func(G) string, validate func(int, G) error, dup error) error {
	if err := p.Now(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(gpus))
	for i, g := range gpus {
		if p.Tick(1) != nil {
			return p.Err()
		}
		if err := validate(i, g); err != nil {
			return fmt.Errorf("gpu %d: %w", i, err)
		}
		n := name(g)
		if seen[n] {
			return fmt.Errorf("%w: duplicate GPU name %q", dup, n)
		}
		seen[n] = true
	}
	return nil
}
