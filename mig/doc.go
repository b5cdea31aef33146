// Package mig plans GPU partitions: NVIDIA Multi-Instance GPU (MIG) slot
// geometry, placement that keeps large profiles placeable, priority-safe
// defragmentation plans and partition templates. The plan types ([Plan],
// [Step], [Cost], [Policy], [NoPlanError]) are vendor-neutral: package
// mig/amdpart plans AMD Instinct compute/memory partition modes with them,
// and package mig/migfile reads and writes layout and template files.
//
// # Model
//
// A MIG GPU has a row of memory-slice slots (8; 4 on the A30). A GPU
// instance of a [Profile] occupies a contiguous [Placement] [start,
// start+size) that must be one of the profile's legal placements; two
// instances conflict exactly when their placements overlap. That, plus
// per-profile instance limits and the single optical-flow engine the "+me"
// profiles share, is the whole rule set (facts-partitions.md §1.4).
//
//   - [Model] is one GPU model's profile table. Profile IDs are per model
//     (ID 14 is 2g.10gb on an A100, 1g.6gb on an A30): look profiles up by
//     name ([Model.Profile]) or by (model, ID) ([Model.ProfileByID]).
//   - [DefaultCatalog] ships tables for A100-40GB, A100-80GB, A30-24GB,
//     H100-80GB, H100-94GB, GH200-96GB, H200-141GB and B200-180GB as
//     fallbacks and fixtures. A provider that reads the tables from NVML
//     builds models with [NewModel] and layers them over the shipped ones
//     with [Catalog.With]; discovered tables take precedence.
//   - [ParseProfileName] and [ProfileName.String] read and write names such
//     as "1g.10gb", "1g.10gb+me", "1c.3g.20gb" ([MustParseProfileName]
//     for literals).
//   - [Layout] is one GPU's instances ([Instance]: profile, placement,
//     idle or in use, owner, owner priority). [Layout.Validate] checks it;
//     [Layout.FreePlacements] lists where a profile fits now.
//
// # Placement and fragmentation
//
// [Layout.Fragmentation] and [NodeFragmentation] measure the free capacity
// that placement rules make unusable for a demand [Mix], against a
// perfectly packable GPU with the same free slots. [Place] and [Fleet]
// choose a GPU and an explicit slot for one request or a batch so that
// placements for large profiles stay open; [FirstFit] and [MostUsedFirst]
// are the baselines they are measured against.
//
// # Defragmentation
//
// [PlanDefrag] finds, for a request that fits nowhere, the cheapest
// reconfiguration as an ordered [Plan] of [Step]s (drain, destroy compute
// instance, destroy GPU instance, create GPU instance at a placement,
// create compute instance), each leaving a valid layout. [Cost] orders
// plans: no eviction beats any eviction, low priorities are evicted before
// high, moves are preferred, then fewer disruptions. [Policy] sets the
// priority a job needs to disrupt work at all ([Policy.Threshold]: a job
// below it neither moves nor evicts in-use work unless
// [Policy.AllowMovesBelowThreshold], the seed's "only P0 jobs may trigger
// a merge"), never lets a job evict work of equal or higher priority
// (nor move it, unless [Policy.MoveAnyPriority]), and bounds disruptions;
// when nothing
// is allowed the error is a [*NoPlanError] (wrapping [ErrNoPlan]) that
// counts the rejected ways of making room per [NoPlanCause] and keeps a few
// examples of each, so it stays small on any fleet. Planning takes about
// linear time in the number of GPUs. [Plan.Explain] says what the plan does
// in words.
//
// # Templates
//
// A [Template] is a named partition layout for every GPU of one model,
// given as profile counts ([TemplateEntry]) whose placements
// [Template.Resolve] finds under the same rules as [Layout]. Production
// clusters predefine a few and assign them by workload type rather than
// reconfigure per request (mig-parted configurations).
// [ShippedTemplates] writes, from a model's placement table, all-<small>
// (inference), all-<quarter>, all-<half>, balanced and whole-gpu
// (training); users add their own in a JSON file (package mig/migfile).
// [ChooseTemplate] picks, for a
// set of GPUs and a demand [Mix] of request counts, the template that
// serves the most demand (Σ min(requests, instances) × memory slices per
// profile) among those whose transition the [Policy] allows, and plans the
// transition as a [Plan] with the same priority safety as
// defragmentation.
//
// # Cancellation
//
// The calls whose time grows with the fleet take a context.Context first:
// [PlanDefrag], [ChooseTemplate], [Place], [NewFleet] and
// [Fleet.PlaceBatch].
// They look at it every few hundred units of work (a GPU validated or
// weighed, a way of making room tried, a packing step) and, once it is
// done, return promptly with an error wrapping ctx.Err(). Calls on one GPU
// or one request ([Fleet.Place], [Fleet.Choose], [Layout] methods) take
// microseconds and no context.
//
// # Limits
//
// Inputs are bounded, and errors for inputs over a size limit wrap
// topology.ErrLimit and name the limit. [MaxSlots] is exported (callers
// size per-GPU tables by it); the others are documented here:
//
//	limit                   value        bounds
//	MaxSlots                16           instances (memory-slice slots) of one GPU
//	maxModelNames           64           aliases and PCI IDs of one model
//	maxMixTotal             1e300        the sum of a Mix's weights (each finite, not negative)
//	maxNoPlanExamples       3            examples per cause in a NoPlanError
//	maxArrangeSteps         1,048,576    placements a template arrangement search tries
//
// Zero values and nil pointers of the package's types return errors (or
// empty results), never panic; see [Mix.Validate] for a Mix's weights.
//
// # AMD and files
//
// AMD Instinct GPUs partition by mode, not by placement; package
// mig/amdpart has their models, GPUs and planner, whose plans are this
// package's [Plan]s (a partition-mode plan sets [Plan.Mode] and
// [Request.Mode]). Package mig/migfile reads and writes the JSON layout
// file (MIG layouts, AMD GPUs, profile tables; schema "gputopo-mig/v1")
// and template file the gputopo CLI's "mig" command works on.
//
// # Applying plans
//
// [PartitionManager] reads layouts and applies one step, dry-run unless
// told to commit; the NVIDIA provider implements it through NVML with
// explicit placements. [ApplyStep] is the same transition in memory, and
// Fake in package mig/migtest is an in-memory PartitionManager that
// enforces the hardware rules independently, for tests. A manager that can
// also name a live instance the way container runtimes do ("MIG-<uuid>")
// implements the optional [InstanceNamer]; both of those do.
//
// Every error wraps a sentinel (ErrOverlap, ErrIllegalPlacement, ErrNoPlan,
// ...) for errors.Is; every parse error wraps [ErrParse], which is
// topology.ErrParse. The enum types (states, step kinds, strategies,
// causes, profile names) implement encoding.TextMarshaler and
// TextUnmarshaler. The package imports no vendor library and builds
// with CGO_ENABLED=0.
package mig
