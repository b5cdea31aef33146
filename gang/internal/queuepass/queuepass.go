// Package queuepass carries the inputs and results of the queue passes
// and of domain clearing between package gang, which runs them beside its
// solver and snapshot internals, and package gang/queue, which is their
// public API and documentation. Each type here has a twin of the same name
// in gang/queue, field for field (gang/queue's tests check that they stay
// so); the generic ones take gang's types (Placement P, Verdict V, Victim
// Vi, Cost C), which this package cannot import.
package queuepass

import (
	"context"
	"fmt"
	"time"
)

// Action is what a queue pass decides for a job (queue.Action).
type Action uint8

// The actions, in queue.Action's order.
const (
	Start Action = iota
	Backfill
	Reserve
	Wait
	Release
	Never
)

var actionNames = [...]string{"start", "backfill", "reserve", "wait", "release", "never"}

// String returns the action's name ("start", "backfill", ...).
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", a)
}

// MarshalText implements encoding.TextMarshaler.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// ParseAction returns the action of a name String returns (false for
// another).
func ParseAction(name string) (Action, bool) {
	for i, n := range actionNames {
		if name == n {
			return Action(i), true
		}
	}
	return 0, false
}

// CanStart reports whether the action starts the job now.
func (a Action) CanStart() bool { return a == Start || a == Backfill }

// QueueSpec is queue.QueueSpec.
type QueueSpec struct {
	Name   string
	Weight int
}

// QueueEntry is queue.QueueEntry.
type QueueEntry[P, V any] struct {
	Job           string `json:"job"`
	Queue         string `json:"queue"`
	Priority      int    `json:"priority"`
	Position      int    `json:"position"`
	QueuePosition int    `json:"queuePosition"`
	JobsAhead     int    `json:"jobsAhead"`
	GPUsAhead     int    `json:"gpusAhead"`
	GPUs          int    `json:"gpus"`
	Action        Action `json:"action"`
	Verdict       V      `json:"verdict"`
	Placement     *P     `json:"placement,omitempty"`
	Reason        string `json:"reason"`
	Members       int    `json:"members,omitempty"`
	Unplanned     bool   `json:"unplanned,omitempty"`
}

// Reservation is queue.Reservation.
type Reservation[P any] struct {
	Job        string        `json:"job"`
	Placement  *P            `json:"placement"`
	WaitsFor   []string      `json:"waitsFor"`
	Start      time.Duration `json:"start"`
	StartKnown bool          `json:"startKnown"`
}

// QueuePlan is queue.QueuePlan.
type QueuePlan[P, V any] struct {
	Entries     []QueueEntry[P, V] `json:"entries"`
	Reservation *Reservation[P]    `json:"reservation,omitempty"`
	Partial     bool               `json:"partial,omitempty"`
}

// Entry returns the entry of the named job.
func (q *QueuePlan[P, V]) Entry(job string) (QueueEntry[P, V], bool) {
	if q == nil {
		return QueueEntry[P, V]{}, false
	}
	for _, e := range q.Entries {
		if e.Job == job {
			return e, true
		}
	}
	return QueueEntry[P, V]{}, false
}

// Resource names of fair-share amounts (queue.ResourceGPU and the rest).
const (
	ResourceGPU       = "gpu"
	ResourceGPUMemory = "gpu-memory"
	ResourceMIGPrefix = "mig/"
)

// Amounts is queue.Amounts.
type Amounts map[string]int64

// FairQueue is queue.FairQueue.
type FairQueue struct {
	Name            string
	Parent          string
	Deserved        Amounts
	Limit           Amounts
	OverQuotaWeight map[string]float64
}

// UsageSample is queue.UsageSample.
type UsageSample struct {
	Queue string
	Age   time.Duration
	Used  Amounts
}

// FairShare is queue.FairShare.
type FairShare struct {
	Queues        []FairQueue
	HalfLife      time.Duration
	History       []UsageSample
	RunningMin    map[string]int
	ReclaimBudget int
}

// Eviction is queue.Eviction.
type Eviction struct {
	Job   string   `json:"job"`
	Queue string   `json:"queue"`
	Pods  []string `json:"pods"`
	Whole bool     `json:"whole"`
	For   string   `json:"for"`
}

// QueueStatus is queue.QueueStatus.
type QueueStatus struct {
	Name          string  `json:"name"`
	Parent        string  `json:"parent,omitempty"`
	Deserved      Amounts `json:"deserved,omitempty"`
	Limit         Amounts `json:"limit,omitempty"`
	Usage         Amounts `json:"usage"`
	Demand        Amounts `json:"demand"`
	FairShare     Amounts `json:"fairShare"`
	DominantShare float64 `json:"dominantShare"`
	Reserved      string  `json:"reserved,omitempty"`
}

// FairEntry is queue.FairEntry.
type FairEntry[P, V any] struct {
	QueueEntry[P, V]
	Reclaimed []string `json:"reclaimed,omitempty"`
}

// FairPlan is queue.FairPlan; ByJob indexes Entries by job name.
type FairPlan[P, V any] struct {
	Entries      []FairEntry[P, V] `json:"entries"`
	Partial      bool              `json:"partial,omitempty"`
	Reservations []Reservation[P]  `json:"reservations"`
	Evictions    []Eviction        `json:"evictions"`
	Queues       []QueueStatus     `json:"queues"`
	Stats        FairPassStats     `json:"stats"`
	ByJob        map[string]int    `json:"-"`
}

// Entry returns the entry of the named job.
func (p *FairPlan[P, V]) Entry(job string) (FairEntry[P, V], bool) {
	if p == nil {
		return FairEntry[P, V]{}, false
	}
	i, ok := p.ByJob[job]
	if !ok {
		return FairEntry[P, V]{}, false
	}
	return p.Entries[i], true
}

// FairPassStats is queue.FairPassStats.
type FairPassStats struct {
	Searches int `json:"searches"`
	Skipped  int `json:"skipped"`
}

// Config is what queue's options set for one pass; St is gang.Strategy.
// SearchBudget is ClearDomain's (0: gang's default).
type Config[St any] struct {
	Strategy      St
	Queues        []QueueSpec
	NoReservation bool
	SearchBudget  int
}

// TargetState is queue.TargetState.
type TargetState uint8

// The states, in queue.TargetState's order.
const (
	TargetReady TargetState = iota
	TargetWaiting
	TargetLost
)

// ClearingTarget is queue.ClearingTarget; Vi, P and C are gang's Victim,
// Placement and Cost.
type ClearingTarget[Vi, P, C any] struct {
	Job       string
	Domain    string
	Level     string
	Victims   []Vi
	Placement *P
	Cost      C
	Exact     bool
	Gap       int
	Domains   int
	Tried     int
}

// Passes are the queue passes package gang registers: S, J, P, V and St
// are gang's Snapshot, Job, Placement, Verdict and Strategy.
type Passes[S, J, P, V, St any] struct {
	PlanQueue     func(ctx context.Context, s *S, jobs []J, cfg Config[St]) (*QueuePlan[P, V], error)
	PlanFairShare func(ctx context.Context, s *S, jobs []J, fs FairShare, cfg Config[St]) (*FairPlan[P, V], error)
}

// Clearing is the domain-clearing preemption package gang registers: S,
// H, P, Vi and C are gang's Snapshot, HierJob, Placement, Victim and Cost.
type Clearing[S, H, P, Vi, C any] struct {
	ClearDomain func(ctx context.Context, s *S, j *H, budget int) (*ClearingTarget[Vi, P, C], error)
	Recheck     func(ctx context.Context, t *ClearingTarget[Vi, P, C], s *S, j *H) (TargetState, *P, error)
}

var registered []any

// Register records what package gang runs for gang/queue (a Passes and a
// Clearing value); gang calls it once, as it is initialised.
func Register(values ...any) { registered = append(registered, values...) }

// Registered returns the registered value of type T. It panics when there
// is none: package gang registers its values before any importer of it
// runs, so a miss is a programming error.
func Registered[T any]() T {
	for _, v := range registered {
		if t, ok := v.(T); ok {
			return t
		}
	}
	var zero T
	panic(fmt.Sprintf("queuepass: nothing of type %T is registered", zero))
}
