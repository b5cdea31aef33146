package scoring

import (
	"fmt"
	"testing"

	"github.com/gputopo/gputopo/internal/shareddata"
	"github.com/gputopo/gputopo/topology"
)

func benchSelect(b *testing.B, node *topology.Node, st *State, req Request) {
	b.Helper()
	c, err := Compile(node)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Select(st, req); err != nil { // warm the lazily built tables
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Select(st, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSelect8(b *testing.B) {
	for _, f := range []func(testing.TB) *topology.Node{fixtureH8, fixtureF1, fixtureB8} {
		node := f(b)
		for k := 1; k <= 8; k++ {
			b.Run(fmt.Sprintf("%s/k=%d", node.Name(), k), func(b *testing.B) { benchSelect(b, node, nil, Request{Count: k}) })
		}
	}
}

func BenchmarkSelect16(b *testing.B) {
	for _, f := range []func(testing.TB) *topology.Node{fixtureN16, fixturePCIe16} {
		node := f(b)
		for k := 2; k <= 8; k++ {
			b.Run(fmt.Sprintf("%s/k=%d", node.Name(), k), func(b *testing.B) { benchSelect(b, node, nil, Request{Count: k}) })
		}
	}
}

func BenchmarkSelect32(b *testing.B) {
	node := fixtureI32(b)
	for _, k := range []int{8, 16} {
		b.Run(fmt.Sprintf("%s/k=%d", node.Name(), k), func(b *testing.B) { benchSelect(b, node, nil, Request{Count: k}) })
	}
}

func BenchmarkSelectMI300XCPX(b *testing.B) {
	f := shareddata.Topology(b, "amd-mi300x-cpx-kfd")
	node, err := f.Node()
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{8, 40, 56} {
		b.Run(fmt.Sprintf("%s/k=%d", node.Name(), k), func(b *testing.B) { benchSelect(b, node, nil, Request{Count: k}) })
	}
}
