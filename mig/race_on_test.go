//go:build race

package mig

// raceSlack widens the allocation bounds of the hostile-input tests under
// the race detector, which allocates more for the same work (sync.Pool is
// disabled and maps carry shadow state). The bounds hold as stated without it.
const raceSlack = 2
