// Package ctxpoll holds the poller through which the long-running calls of
// gang and mig look at their caller's context: often enough that a
// cancelled call returns within about a millisecond, rarely enough that the
// looks cost nothing measurable.
package ctxpoll

import (
	"context"
	"fmt"
)

// Every is how many units of work (a node or domain visited, a GPU
// validated or weighed, a victim set enumerated, a packing step) pass
// between two looks at the context.
const Every = 256

// Poller watches the context of one exported call. The call ticks it as it
// works; once the context is done, every tick returns the same error, which
// wraps ctx.Err(). A nil *Poller, and one made with a nil context, never
// stops.
type Poller struct {
	ctx    context.Context
	prefix string // what the error starts with ("gang:", "mig: PlanDefrag")
	work   int    // units of work since the last look
	err    error  // set once the context is done
}

// New returns a poller for ctx whose error reads "<prefix> stopped: <ctx.Err()>".
func New(ctx context.Context, prefix string) *Poller {
	return &Poller{ctx: ctx, prefix: prefix}
}

// Tick records units of work and, every Every units, looks at the
// context. It returns the error once the context is done, nil before.
func (p *Poller) Tick(units int) error {
	if p == nil {
		return nil
	}
	p.work += units
	if p.work < Every {
		return p.err
	}
	return p.look()
}

// look starts a new count of units and looks at the context: Tick's slow
// path, apart so that the compiler inlines Tick's fast one at every call.
//
//go:noinline
func (p *Poller) look() error {
	p.work = 0
	return p.Now()
}

// Now looks at the context at once (at the start of a call, say) and
// returns the error, if any.
func (p *Poller) Now() error {
	if p == nil {
		return nil
	}
	if p.err == nil && p.ctx != nil {
		if err := p.ctx.Err(); err != nil {
			p.err = fmt.Errorf("%s stopped: %w", p.prefix, err)
		}
	}
	return p.err
}

// Context returns the context the poller watches, for calls that take a
// context themselves (context.Background for a nil poller or context).
func (p *Poller) Context() context.Context {
	if p == nil || p.ctx == nil {
		return context.Background()
	}
	return p.ctx
}

// Err returns the error seen by the last look: nil until the context is
// found done. It does not look at the context.
func (p *Poller) Err() error {
	if p == nil {
		return nil
	}
	return p.err
}
