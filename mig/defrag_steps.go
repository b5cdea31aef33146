package mig

import (
	"fmt"

	"github.com/gputopo/gputopo/topology"
)

// build turns a solution into ordered steps, checking every step against a
// simulated copy of the layouts: evictions and reclaims first, then the
// moves, then the request's instance.
func (pn *planner) build(s *solution) (*Plan, error) {
	w := &stepWriter{sim: make([]*Layout, len(pn.gpus)), src: pn.gpus[s.t.g].l}
	for i := range pn.gpus {
		w.sim[i] = pn.gpus[i].l.Clone()
	}
	w.plan = &Plan{Request: pn.req, GPU: w.src.GPU, Placement: s.t.pl, Considered: pn.weighed}
	if err := w.clear(s, pn.req.Profile); err != nil {
		return nil, err
	}
	if err := w.move(pn.movesOf(s)); err != nil {
		return nil, err
	}
	req := Instance{Profile: w.src.Model.spec.Profiles[s.t.pi].Name, Placement: s.t.pl, Owner: pn.req.Owner, Priority: pn.req.Priority}
	if err := w.bringUp(w.src.GPU, req, "pending request "+pn.req.String()); err != nil {
		return nil, err
	}
	p := w.plan
	p.Cost = costOf(w.src, s.acts)
	for _, m := range p.Moves {
		if m.From != m.To {
			p.Cost.CrossGPUMoves++
		}
	}
	return p, nil
}

// stepWriter writes a plan's steps, applying each to sim.
type stepWriter struct {
	sim  []*Layout // the layouts as the steps so far leave them
	src  *Layout   // the target GPU, as it is before the plan
	plan *Plan
}

// emit checks step st against the simulated layouts and appends it.
func (w *stepWriter) emit(st Step) error {
	if err := ApplyStep(w.sim, st); err != nil {
		return fmt.Errorf("mig: %w: plan step %s leaves an invalid layout: %v", topology.ErrInternal, st, err)
	}
	w.plan.Steps = append(w.plan.Steps, st)
	return nil
}

// takeDown drains (when in use) and destroys instance in of the target GPU.
func (w *stepWriter) takeDown(in Instance, why string) error {
	at := Step{GPU: w.src.GPU, Profile: in.Profile, Placement: in.Placement, Why: why}
	if in.State == InUse {
		drain := at
		drain.Kind, drain.Owner, drain.Priority = StepDrain, in.Owner, in.Priority
		if err := w.emit(drain); err != nil {
			return err
		}
	}
	if !in.NoComputeInstance {
		at.Kind = StepDestroyComputeInstance
		if err := w.emit(at); err != nil {
			return err
		}
	}
	at.Kind = StepDestroyGPUInstance
	return w.emit(at)
}

// bringUp creates in's GPU instance and compute instance on gpu, starting
// in's owner there.
func (w *stepWriter) bringUp(gpu string, in Instance, why string) error {
	at := Step{Kind: StepCreateGPUInstance, GPU: gpu, Profile: in.Profile, Placement: in.Placement, Why: why}
	if err := w.emit(at); err != nil {
		return err
	}
	at.Kind, at.Owner, at.Priority = StepCreateComputeInstance, in.Owner, in.Priority
	return w.emit(at)
}

// clear takes down the instances the solution evicts or reclaims, freeing
// their slots first.
func (w *stepWriter) clear(s *solution, req ProfileName) error {
	for k, a := range s.acts {
		in := w.src.Instances[k]
		var why string
		switch a {
		case actEvict:
			w.plan.Evictions = append(w.plan.Evictions, Eviction{GPU: w.src.GPU, Instance: in})
			why = "evict to make room for " + req.String()
		case actReclaim:
			w.plan.Reclaimed = append(w.plan.Reclaimed, Eviction{GPU: w.src.GPU, Instance: in})
			why = "reclaim idle instance for " + req.String()
		default:
			continue
		}
		if err := w.takeDown(in, why); err != nil {
			return err
		}
	}
	return nil
}

// pendingMove is one move of a solution while the steps are written.
type pendingMove struct {
	in       Instance // on the target GPU
	to       int      // destination GPU index
	dest     Placement
	isDown   bool // the source is taken down already
	finished bool
}

// movesOf lists the solution's moves, in instance order.
func (pn *planner) movesOf(s *solution) []*pendingMove {
	var out []*pendingMove
	for k, a := range s.acts {
		if a == actMove {
			out = append(out, &pendingMove{in: pn.gpus[s.t.g].l.Instances[k], to: s.dest[k].gpu, dest: s.dest[k].pl})
		}
	}
	return out
}

// move writes the moves: make-before-break when the destination is free
// (the workload restarts on a ready instance); otherwise, when every
// remaining move waits for another (a cycle, or an instance limit such as
// the single +me), one source is taken down first and its destination
// created once it is free.
func (w *stepWriter) move(moves []*pendingMove) error {
	for _, m := range moves {
		w.plan.Moves = append(w.plan.Moves, Move{Instance: m.in, From: w.src.GPU, To: w.sim[m.to].GPU, Dest: m.dest})
	}
	for remaining := len(moves); remaining > 0; {
		progress := false
		for _, m := range moves {
			if m.finished || w.sim[m.to].CanPlace(m.in.Profile.String(), m.dest) != nil {
				continue
			}
			why := fmt.Sprintf("move %s from %s %v to %s %v", who(&m.in), w.src.GPU, m.in.Placement, w.sim[m.to].GPU, m.dest)
			moved := m.in
			moved.Placement = m.dest
			if err := w.bringUp(w.sim[m.to].GPU, moved, why); err != nil {
				return err
			}
			if !m.isDown {
				if err := w.takeDown(m.in, why); err != nil {
					return err
				}
			}
			m.finished = true
			remaining--
			progress = true
		}
		if progress {
			continue
		}
		if err := w.breakCycle(moves); err != nil {
			return err
		}
	}
	return nil
}

// breakCycle takes down the source of the first move that is neither
// finished nor down.
func (w *stepWriter) breakCycle(moves []*pendingMove) error {
	for _, m := range moves {
		if !m.finished && !m.isDown {
			why := fmt.Sprintf("move %s from %s %v to %s %v (its destination is not free yet)",
				who(&m.in), w.src.GPU, m.in.Placement, w.sim[m.to].GPU, m.dest)
			m.isDown = true
			return w.takeDown(m.in, why)
		}
	}
	return fmt.Errorf("mig: %w: moves cannot be ordered", topology.ErrInternal)
}
