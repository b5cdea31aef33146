package gang

import (
	"context"
	"fmt"
)

// pollEvery is how many units of work (a node or domain visited by the
// solver, a victim set enumerated) pass between two looks at the caller's
// context: often enough that a cancelled call returns within about a
// millisecond, rarely enough that the look costs nothing measurable.
const pollEvery = 256

// poller watches the context of one exported call. The searches tick it as
// they work; once the context is done every tick returns the same error,
// which wraps ctx.Err().
type poller struct {
	ctx  context.Context
	work int
	err  error
}

func newPoller(ctx context.Context) *poller {
	if ctx == nil {
		ctx = context.Background()
	}
	return &poller{ctx: ctx}
}

// tick records units of work and, every pollEvery units, looks at the
// context.
func (p *poller) tick(units int) error {
	p.work += units
	if p.work < pollEvery {
		return p.err
	}
	p.work = 0
	return p.now()
}

// now looks at the context at once.
func (p *poller) now() error {
	if p.err == nil {
		if err := p.ctx.Err(); err != nil {
			p.err = fmt.Errorf("gang: stopped: %w", err)
		}
	}
	return p.err
}
