// Package gangfile reads the job and cluster files of the `gputopo gang`
// command (YAML or JSON) into package gang's values: [ParseJobs] returns
// gang.Job values and queue weights, [ParseCluster] a gang.Snapshot. The
// formats are documented on [Jobs] and [Cluster] (nodes may share
// topologies through a table, [SharedTopology]). [ReadAll] reads a file from
// an io.Reader within [MaxFileBytes].
//
// The package is built only on gang's exported API: a program that builds
// its jobs and snapshots in Go does not need it.
//
// # Limits
//
// Inputs are bounded before anything grows with them (the limits below,
// and gang's limits on nodes, jobs, pod sets, labels and names, checked on
// the decoded document before it is turned into structs): a file beyond a
// limit fails with an error wrapping topology.ErrLimit that names it.
// [MaxFileBytes] and [MaxTopologies] are exported (a program that writes
// cluster files, such as gputopo capture, keeps within them); the other is
// documented here:
//
//	limit             value    bounds
//	MaxFileBytes      2 MiB    a job or cluster file, and the document once YAML aliases are expanded
//	MaxTopologies     4,096    entries of a cluster file's shared topology table
//	maxExpandedBytes  32 MiB   what node templates and shared topologies expand to (names, labels, domain paths)
//
// Every error wraps gang.ErrParse (which is topology.ErrParse), or
// gang.ErrInvalidJob / gang.ErrInvalidSnapshot (and topology's sentinels)
// for a file that parses but describes an impossible job or cluster.
package gangfile
