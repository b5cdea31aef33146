// Package plugin is gputopo's pair of out-of-tree kube-scheduler plugins:
// GPUTopology (Name, New, Plugin) for the devices (PreFilter, Filter,
// PreScore, Score, Reserve, PreBind, Bind, PostBind) and GPUTopologyGang
// (GangName, NewGang, Gang) for the gangs (Permit, PostFilter,
// PlacementGenerate, PlacementScore). Built into a kube-scheduler binary
// with app.WithPlugin(plugin.Name, plugin.New) and
// app.WithPlugin(plugin.GangName, plugin.NewGang) (see
// ../cmd/kube-scheduler), and both enabled in a profile, they place pods
// that request GPUs (the nvidia.com/gpu or amd.com/gpu extended resources)
// on the device sets the hardware wants.
//
// The framework builds each plugin of a profile on its own, in no fixed
// order. GPUTopology owns the profile's device state (the devices in use,
// the decoded topologies, the reservations, the gangs assembling);
// GPUTopologyGang reaches it through one small interface (deviceState),
// found by the profile's framework handle: GPUTopology's factory records its
// state under the handle, GPUTopologyGang's factory takes the entry of its
// handle, made by whichever factory runs first, and reads the state once
// GPUTopology's factory has run. The entry is dropped when both have joined,
// or when the scheduler asks the plugins for their events (after every
// profile is built). A profile with GPUTopologyGang but not GPUTopology has
// no state: kube-scheduler fails to start with an error wrapping
// ErrNoDeviceState (from the gang plugin's EventsToRegister), and the gang
// plugin's extension points answer with that error.
//
// What each extension point does:
//
//   - PreFilter reads the pod's request: its GPU count and the request
//     annotations (AnnotationScope and AnnotationScopeMode, memory per
//     device, a share of one GPU, required devices; see
//     request.go). Pods without GPUs skip the plugin; a malformed
//     annotation rejects the pod (UnschedulableAndUnresolvable, an error
//     wrapping ErrBadRequest that names the annotation and says what is
//     wanted), which kube-scheduler shows in the pod's PodScheduled
//     condition and FailedScheduling event.
//   - Filter looks up the node's topology, decoded from the
//     gputopo.io/topology annotation (package topology/kube) and compiled
//     for package scoring once per annotation value when the node
//     informer delivers it (a decoder panic is recovered). A node whose
//     annotation is missing, malformed, larger than
//     topology/kube.MaxAnnotationBytes or beyond a library limit is
//     filtered out (UnschedulableAndUnresolvable) with a reason of at most
//     MaxReasonBytes, and the full cause is logged once per node and
//     annotation value; other nodes are unaffected. The devices in use
//     (whole, or GPU shares) are maintained from the pod informer's
//     events and the plugin's own reservations (assumed at Reserve,
//     forgotten at Unreserve), not rebuilt from the node's pods on every
//     Filter: a node's view is rebuilt only when its GPU pods change, and
//     is used only when its GPU pods are exactly those of the scheduler's
//     NodeInfo (checked once per NodeInfo generation); otherwise (a
//     preemption simulation, an event not yet delivered) Filter rebuilds
//     the view from the NodeInfo's pods. scoring's Select then chooses a
//     device set; a node without one is filtered out with the reason
//     (Unschedulable, or UnschedulableAndUnresolvable when the node could
//     not meet the request even with every GPU idle, so that preemption
//     leaves it alone). Nodes of one hardware shape in the same state
//     share Select's answer: the plugin memoises it per shape, by device
//     use and request (shape.go).
//   - A request that no node of the cluster could meet even idle is
//     rejected at PreFilter (UnschedulableAndUnresolvable), before any
//     Filter; every event the plugin registers has a queueing hint, so such
//     a pod is retried only when a node that could meet it appears.
//   - Score is scoring.ScoreNode of that set (0..100, comparable across
//     nodes).
//   - Reserve records the chosen devices; PreBind writes them on the pod as
//     the gputopo.io/devices annotation (indices) and gputopo.io/device-ids
//     (UUIDs, when the topology has them), for the device plugin or DRA
//     driver to honour. With Args.BindWithAnnotations, Bind instead binds
//     the pod with those annotations in the Binding (one pod write), and
//     PostBind writes them if another binder bound the pod first.
//   - Permit (GPUTopologyGang) holds members of a gang (label gputopo.io/gang=<name>, or
//     scheduling.x-k8s.io/pod-group=<name>, with gputopo.io/gang-min-count=<n>)
//     until n members are placed, then lets them all bind together. Before
//     a member reserves anything, PreFilter asks package gang (gang.Check on
//     the scheduler's snapshot, with the topology levels of Args and the
//     NVLink clique, members already placed included) whether the gang can
//     be completed beside the gangs already assembling, honouring its
//     topology annotations and, for each pod set (template) of the gang,
//     only the nodes where one of its pods passes the profile's other
//     Filter plugins (see podSetFilters), and confines the member to the
//     planned nodes;
//     the chosen domain is written on the members at PreBind. A gang first
//     in line that does not fit holds the placement queue.PlanQueue reserves
//     for it, so smaller pods backfill only around it (see gangTracker).
//   - PostFilter (GPUTopologyGang) preempts for a gang member: the fewest whole lower-priority
//     jobs inside one domain (gang.Preempt), never part of a gang, and
//     nominates a node of the gang's placement.
//   - With the 1.37 pod-group cycle on (feature gates GenericWorkload and
//     TopologyAwareWorkloadScheduling), GPUTopologyGang's
//     GeneratePlacements offers one placement per domain of a PodGroup's
//     topology key where gang.Check places the whole group, and its
//     ScorePlacement ranks them by device-set score and the GPUs they
//     leave stranded.
//
// GPUTopology implements SignPlugin, so kube-scheduler's opportunistic
// batching stays on for its profile: the signature fragment holds the
// parsed request and every gputopo.io/ annotation, so pods with equal
// signatures get equal Filter and Score answers on every node in the same
// state. Gang members and pods with a malformed request are not signed.
package plugin
