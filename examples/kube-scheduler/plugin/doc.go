// Package plugin is gputopo's out-of-tree kube-scheduler plugin,
// GPUTopology. Built into a kube-scheduler binary with
// app.WithPlugin(plugin.Name, plugin.New) (see ../main.go), it places pods
// that request GPUs (the nvidia.com/gpu or amd.com/gpu extended resources)
// on the device sets the hardware wants:
//
//   - PreFilter reads the pod's GPU count and its optional scope
//     annotations; pods without GPUs skip the plugin.
//   - Filter looks up the node's topology, decoded from the
//     gputopo.io/topology annotation (package topology/kube) once per
//     annotation value when the node informer delivers it (a decoder
//     panic is recovered). A node whose annotation is missing, malformed,
//     larger than topology/kube.MaxAnnotationBytes or beyond a library
//     limit is filtered out (UnschedulableAndUnresolvable) with a reason
//     of at most MaxReasonBytes, and the full cause is logged once per
//     node and annotation value; other nodes are unaffected. Filter then
//     rebuilds which devices are in use from the pods on the node
//     (their gputopo.io/devices annotation, or this scheduler's own
//     reservations for pods still binding) and asks scoring.SelectDevices
//     for a device set; a node without one is filtered out with the reason.
//   - Score is scoring.ScoreNode of that set (0..100, comparable across
//     nodes).
//   - Reserve records the chosen devices; PreBind writes them on the pod as
//     the gputopo.io/devices annotation (indices) and gputopo.io/device-ids
//     (UUIDs, when the topology has them), for the device plugin or DRA
//     driver to honour.
//   - Permit holds members of a gang (label gputopo.io/gang=<name>, or
//     scheduling.x-k8s.io/pod-group=<name>, with gputopo.io/gang-min-count=<n>)
//     until n members are placed, then lets them all bind together. Before
//     a member reserves anything, PreFilter asks package gang (gang.Check on
//     the scheduler's snapshot, with the topology levels of Args and the
//     NVLink clique, members already placed included) whether the gang can
//     be completed beside the gangs already assembling, honouring its
//     topology annotations, and confines the member to the planned nodes;
//     the chosen domain is written on the members at PreBind. A gang first
//     in line that does not fit holds the placement gang.PlanQueue reserves
//     for it, so smaller pods backfill only around it (see gangTracker).
//   - PostFilter preempts for a gang member: the fewest whole lower-priority
//     jobs inside one domain (gang.Preempt), never part of a gang, and
//     nominates a node of the gang's placement.
//   - With the 1.37 pod-group cycle on (feature gates GenericWorkload and
//     TopologyAwareWorkloadScheduling), GeneratePlacements offers one
//     placement per domain of a PodGroup's topology key where gang.Check
//     places the whole group, and ScorePlacement ranks them by device-set
//     score and the GPUs they leave stranded.
//
// The plugin does not implement SignPlugin: its decisions depend on device
// state that pod signatures cannot express, so kube-scheduler turns
// opportunistic batching off for profiles that enable it.
package plugin
