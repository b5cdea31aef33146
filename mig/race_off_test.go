//go:build !race

package mig

// raceSlack is 1: without the race detector the bounds hold as stated.
const raceSlack = 1
