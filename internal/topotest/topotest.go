// Package topotest holds test helpers for building topology values from
// constant input.
package topotest

import "github.com/gputopo/gputopo/topology"

// MustParsePCIAddress is topology.ParsePCIAddress for constant input in
// tests and fixtures: it panics on error.
func MustParsePCIAddress(s string) topology.PCIAddress {
	a, err := topology.ParsePCIAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}
