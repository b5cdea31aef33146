// Package capture reads a cluster's nodes and running pods from the
// Kubernetes API and turns them into a cluster file of package
// gang/gangfile (gangfile.Cluster), so that `gputopo gang`, `gputopo place`
// and `gputopo simulate` can answer "would this job fit, and where"
// offline.
//
// It talks to the API server with net/http and encoding/json only (no
// client-go): [LoadKubeconfig] reads a kubeconfig's current context (server,
// CA, client certificate, bearer token or token file), [InCluster] the
// service account a pod runs as. [Client.Capture] lists nodes and pods
// page by page and [Build] keeps what placement needs:
//
//   - per node: its name, its topology (decoded from the gputopo.io/topology
//     annotation and validated), the labels used as levels plus GPU Feature
//     Discovery's and gputopo's own labels, allocatable CPU and memory, and
//     whether it is cordoned;
//   - per bound, unfinished pod: its namespace/name, node, job (gang label,
//     else controlling owner, else the pod), the devices the scheduler
//     plugin chose (the gputopo.io/devices annotation), CPU and memory
//     requests, priority, Kueue queue, and whether it is terminating.
//
// Topologies go into the file's shared table (gangfile.SharedTopology):
// one entry per distinct topology once device UUIDs, PCI addresses and the
// multi-node fabric domain are left out (placement does not use them; the
// clique label keeps the NVLink domain), holding also the labels all its
// nodes share; each node refers to its entry by name (topologyRef). A
// capture of 5,000 nodes of three shapes and 3,000 pods takes about 1.3 MB
// of the 2 MiB gangfile.MaxFileBytes (TestCaptureOf5000Nodes), where
// inline topologies stop near 300 DGX nodes. Options.InlineTopologies writes
// each node's topology in full, as earlier captures did.
//
// Nothing else is captured: no other labels or annotations, no secrets,
// no pod specs, environment or images. A GPU pod without a device choice
// (scheduled by another scheduler, or a MIG pod) cannot be placed on
// particular devices; it is left out with a warning.
//
// Inputs are bounded: the bytes read from the API server in one capture
// ([MaxResponseBytes]), the nodes ([gang.MaxNodes]) and allocations
// ([gang.MaxAllocations]); errors beyond a limit wrap topology.ErrLimit and
// name it.
package capture
