// Package webui is the page `gputopo serve` serves: the node graph, MIG
// and AMD partition layouts with their free placements, a placement
// query, a gang placement on a cluster tree and the simulator's chart,
// drawn by hand-written JavaScript and SVG embedded in the binary (the
// page loads nothing from the network).
//
// The JSON endpoints:
//
//	GET /api/node         the node as a graph: devices, fabric links, NVSwitch vertices, NICs, NUMA nodes, islands
//	GET /api/place        a placement (parameters gpus, busy, require, exclude, scope, scope-mode, trade): the JSON of `gputopo place --json`
//	GET /api/partitions   MIG layouts with free placements per profile; AMD partition modes
//	GET /api/gang?job=J   the cluster tree, the jobs, and job J's verdict and placement (gang.Check)
//	GET /api/simulate     the simulator demo's curves: unallocated GPU % against arrived workload, per policy
//
// Errors are JSON {"error": "..."} with status 400 (ErrBadQuery: also an
// undecodable, unknown or repeated query parameter, named), 404
// (ErrNotFound), 409 (the request does not fit), 503 (ErrBusy, with
// Retry-After), 507 (ErrTooLarge) or 500.
//
// The server is bounded (Limits): every answer is computed once per input
// and its bytes reused by every request for it, at most
// Limits.MaxInFlight API requests are answered at once, and an answer
// larger than Limits.MaxResponseBytes is refused. A gang answer on a
// cluster of gang.MaxNodes DGX nodes is about 10 MB of JSON; 20 clients
// asking for it at once keep the heap near 130 MB.
//
// The package is internal to the CLI; the browser test module
// (examples/gputopo/webtest) starts it in-process.
package webui
