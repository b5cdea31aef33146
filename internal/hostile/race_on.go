//go:build race

package hostile

// RaceSlack widens allocation bounds under the race detector, which
// allocates more for the same work (sync.Pool is disabled, maps carry shadow
// state). The bounds hold as stated without it.
const RaceSlack = 2
