//go:build !race

package kube_test

// raceSlack is 1: without the race detector the bounds hold as stated.
const raceSlack = 1
