package mig

import (
	"context"
	"fmt"
)

// pollEvery is how many units of work (a GPU validated or weighed, a way
// of making room tried, a packing step) pass between two looks at the
// context: often enough to stop within well under a millisecond, rarely
// enough to cost nothing measurable.
const pollEvery = 256

// poller watches a context for long-running calls. The zero value never
// stops.
type poller struct {
	ctx  context.Context
	what string // the call, for the error ("PlanDefrag")
	work int    // units of work since the last look
	err  error  // set once the context is done
}

func newPoller(ctx context.Context, what string) poller {
	return poller{ctx: ctx, what: what}
}

// tick counts one unit of work and reports whether the call must stop
// (then err says why).
func (p *poller) tick() bool {
	if p.err != nil {
		return true
	}
	if p.work++; p.work < pollEvery || p.ctx == nil {
		return false
	}
	p.work = 0
	if err := p.ctx.Err(); err != nil {
		p.err = fmt.Errorf("mig: %s stopped: %w", p.what, err)
	}
	return p.err != nil
}

// check looks at the context now (at the start of a call) and reports the
// error, if any.
func (p *poller) check() error {
	if p.err == nil && p.ctx != nil {
		if err := p.ctx.Err(); err != nil {
			p.err = fmt.Errorf("mig: %s stopped: %w", p.what, err)
		}
	}
	return p.err
}
