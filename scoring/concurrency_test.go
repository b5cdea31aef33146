package scoring

import (
	"sync"
	"testing"

	"github.com/gputopo/gputopo/topology"
)

// Concurrent first calls on new shapes build the shared tables once and
// agree with sequential calls (run with -race).
func TestConcurrentSelect(t *testing.T) {
	nodes := []*topology.Node{fixturePCIe16(t), fixtureF2(t), fixtureNVL72(t)}
	want := map[[2]int]DeviceSet{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ni, node := range nodes {
				for k := 1 + g%3; k <= 6; k += 2 {
					r, err := SelectDevices(node, nil, Request{Count: k}, WithExplanation())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, ok := want[[2]int{ni, k}]; ok && prev != r.Set {
						t.Errorf("%s k=%d: %v vs %v", node.Name(), k, prev, r.Set)
					}
					want[[2]int{ni, k}] = r.Set
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
}
