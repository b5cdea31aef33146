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
//   - Permit holds members of a gang (label gputopo.io/gang=<name>, label
//     gputopo.io/gang-min-count=<n>) until n members are placed, then lets
//     them all bind together. Before a member reserves anything, PreFilter
//     asks package gang (gang.Check on the scheduler's snapshot, members
//     already placed included) whether the gang can still be completed,
//     and turns the member away if not. Only one gang assembles at a time
//     (a token taken at PreFilter), so two gangs can never each hold half
//     of what both need; a gang that times out at Permit, or one of whose
//     members fits nowhere, has all its waiting members rejected at once,
//     which releases their devices and the token, and reactivates the pods
//     of gangs that were waiting for it.
//
// The plugin does not implement SignPlugin: its decisions depend on device
// state that pod signatures cannot express, so kube-scheduler turns
// opportunistic batching off for profiles that enable it.
package plugin
