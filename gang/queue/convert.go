package queue

import (
	"github.com/gputopo/gputopo/gang"
	"github.com/gputopo/gputopo/gang/internal/queuepass"
)

// The passes run in package gang (beside the solver and the snapshot's
// views they share) and hand their inputs and results over in
// internal/queuepass's types, twins of this package's: what follows
// copies between the two. A struct without a field of a named type of its
// own converts in one expression, which stops compiling if the twins
// drift; the others are copied field by field, and TestTwinsInStep fails
// when a field is left out.

// passes are package gang's queue passes.
var passes = queuepass.Registered[queuepass.Passes[gang.Snapshot, gang.Job, gang.Placement, gang.Verdict, gang.Strategy]]()

type (
	passEntry       = queuepass.QueueEntry[gang.Placement, gang.Verdict]
	passPlan        = queuepass.QueuePlan[gang.Placement, gang.Verdict]
	passReservation = queuepass.Reservation[gang.Placement]
	passFairPlan    = queuepass.FairPlan[gang.Placement, gang.Verdict]
)

func queueEntryOf(e passEntry) QueueEntry {
	return QueueEntry{Job: e.Job, Queue: e.Queue, Priority: e.Priority, Position: e.Position, QueuePosition: e.QueuePosition,
		JobsAhead: e.JobsAhead, GPUsAhead: e.GPUsAhead, GPUs: e.GPUs, Action: Action(e.Action), Verdict: e.Verdict,
		Placement: e.Placement, Reason: e.Reason, Members: e.Members, Unplanned: e.Unplanned}
}

func reservationOf(r passReservation) Reservation {
	return Reservation(r)
}

func queuePlanOf(p *passPlan) *QueuePlan {
	out := &QueuePlan{Entries: make([]QueueEntry, len(p.Entries)), Partial: p.Partial}
	for i, e := range p.Entries {
		out.Entries[i] = queueEntryOf(e)
	}
	if p.Reservation != nil {
		r := reservationOf(*p.Reservation)
		out.Reservation = &r
	}
	return out
}

func queueStatusOf(q queuepass.QueueStatus) QueueStatus {
	return QueueStatus{Name: q.Name, Parent: q.Parent, Deserved: Amounts(q.Deserved), Limit: Amounts(q.Limit), Usage: Amounts(q.Usage),
		Demand: Amounts(q.Demand), FairShare: Amounts(q.FairShare), DominantShare: q.DominantShare, Reserved: q.Reserved}
}

func fairPlanOf(p *passFairPlan) *FairPlan {
	out := &FairPlan{Entries: make([]FairEntry, len(p.Entries)), Partial: p.Partial,
		Reservations: make([]Reservation, len(p.Reservations)), Evictions: make([]Eviction, len(p.Evictions)),
		Queues: make([]QueueStatus, len(p.Queues)), Stats: FairPassStats(p.Stats), byJob: make(map[string]int, len(p.Entries))}
	for i, e := range p.Entries {
		out.Entries[i] = FairEntry{QueueEntry: queueEntryOf(e.QueueEntry), Reclaimed: e.Reclaimed}
		out.byJob[e.Job] = i
	}
	for i, r := range p.Reservations {
		out.Reservations[i] = reservationOf(r)
	}
	for i, e := range p.Evictions {
		out.Evictions[i] = Eviction(e)
	}
	for i, q := range p.Queues {
		out.Queues[i] = queueStatusOf(q)
	}
	return out
}

func fairShareIn(fs FairShare) queuepass.FairShare {
	out := queuepass.FairShare{HalfLife: fs.HalfLife, RunningMin: fs.RunningMin, ReclaimBudget: fs.ReclaimBudget}
	if fs.Queues != nil {
		out.Queues = make([]queuepass.FairQueue, len(fs.Queues))
	}
	for i, q := range fs.Queues {
		out.Queues[i] = queuepass.FairQueue{Name: q.Name, Parent: q.Parent, Deserved: queuepass.Amounts(q.Deserved),
			Limit: queuepass.Amounts(q.Limit), OverQuotaWeight: q.OverQuotaWeight}
	}
	if fs.History != nil {
		out.History = make([]queuepass.UsageSample, len(fs.History))
	}
	for i, h := range fs.History {
		out.History[i] = queuepass.UsageSample{Queue: h.Queue, Age: h.Age, Used: queuepass.Amounts(h.Used)}
	}
	return out
}
