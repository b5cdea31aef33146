package webui

import (
	"errors"
	"net/url"
	"testing"

	"github.com/gputopo/gputopo/provider/catalog"
)

// FuzzParsePlaceQuery feeds /api/place's query parser any query string:
// it either fails with ErrBadQuery or returns a request within the node.
func FuzzParsePlaceQuery(f *testing.F) {
	node, err := catalog.Get("dgx-h100")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"gpus=2", "gpus=3&busy=0,3-5&require=1&exclude=7", "gpus=2&scope=numa&scope-mode=preferred&trade=true",
		"gpus=0", "busy=7-0", "gpus=99999999999999999999", "busy=1,1", "gpus=%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		pq, err := ParsePlaceQuery(node, q)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("%q: error without ErrBadQuery: %v", raw, err)
			}
			return
		}
		n := node.Len()
		if pq.Request.Count < 1 || pq.Request.Count > n {
			t.Fatalf("%q: count %d outside 1..%d", raw, pq.Request.Count, n)
		}
		for _, l := range [][]int{pq.Busy, pq.Request.Required, pq.Request.Excluded} {
			seen := map[int]bool{}
			for _, d := range l {
				if d < 0 || d >= n || seen[d] {
					t.Fatalf("%q: device %d out of range or repeated in %v", raw, d, l)
				}
				seen[d] = true
			}
		}
		// Whatever parsed, placing it answers or fails without a panic.
		_, _ = Place(node, pq)
	})
}
