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
// Inputs are bounded before anything grows with them ([MaxFileBytes],
// [MaxExpandedBytes], [MaxTopologies], and gang's limits on nodes, jobs, pod
// sets, labels and names, checked on the decoded document before it is
// turned into structs): a file beyond a limit fails with an error wrapping
// topology.ErrLimit that names it. Every error wraps gang.ErrParse (which
// is topology.ErrParse), or gang.ErrInvalidJob / gang.ErrInvalidSnapshot
// (and topology's sentinels) for a file that parses but describes an
// impossible job or cluster.
package gangfile
