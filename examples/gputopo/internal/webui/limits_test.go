package webui

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
)

// Many callers asking for one key at once get one computation; the cache
// stays within its byte budget as keys come and go.
func TestAnswerCacheOnceAndBounded(t *testing.T) {
	c := answerCache{maxBytes: 10_000}
	var computed atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r := c.get("k", func() (reply, bool) {
				computed.Add(1)
				return reply{200, []byte("answer")}, true
			})
			assert.Equal(t, "answer", string(r.body))
		})
	}
	wg.Wait()
	assert.EqualValues(t, 1, computed.Load(), "computed once")

	for i := range 100 {
		r := c.get(fmt.Sprint(i), func() (reply, bool) { return reply{200, make([]byte, 1000)}, true })
		require.Len(t, r.body, 1000)
		c.mu.Lock()
		assert.LessOrEqual(t, c.bytes, c.maxBytes)
		n := 0
		for _, a := range c.m {
			n += len(a.body)
		}
		assert.Equal(t, n, c.bytes, "the count matches what is kept")
		c.mu.Unlock()
	}
	// An answer cut short is not kept: the next caller computes again.
	n := 0
	for range 2 {
		c.get("cut", func() (reply, bool) { n++; return reply{500, nil}, false })
	}
	assert.Equal(t, 2, n)
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery("gpus=2&busy=0%2C1&&scope-mode=preferred", placeParams...)
	require.NoError(t, err)
	assert.Equal(t, url.Values{"gpus": {"2"}, "busy": {"0,1"}, "scope-mode": {"preferred"}}, q)
	for raw, want := range map[string]string{
		"gpus=4&busy=0-3%zz":                 `"busy"`,
		"gpus=4;busy=0-3":                    `"gpus=4;busy=0-3"`,
		"gpu=4":                              `unknown parameter "gpu"`,
		"gpus=1&gpus=2":                      `"gpus" given twice`,
		"%zz":                                `"%zz"`,
		strings.Repeat("a", MaxQueryBytes+1): "bytes",
	} {
		_, err := ParseQuery(raw, placeParams...)
		require.Error(t, err, raw)
		assert.True(t, errors.Is(err, ErrBadQuery), "%v", err)
		assert.Contains(t, err.Error(), want)
	}
}

// FuzzParseQuery feeds the strict query reader any raw query: it fails
// with ErrBadQuery, or returns only allowed parameters, once each, whose
// re-encoding reads back the same; then /api/place's parameter checks
// either refuse it or return a request within the node.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"gpus=2", "gpus=3&busy=0,3-5&require=1&exclude=7", "gpus=2&scope=numa&scope-mode=preferred&trade=true",
		"gpus=4&busy=0-3%zz", "gpus=4;busy=0-3", "gpus=2&gpus=3", "gpus=%32", "nope=1", "&&", "=", "gpus", "busy=0-3%2C5"} {
		f.Add(s)
	}
	node := mustNode(f)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := ParseQuery(raw, placeParams...)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("%q: error without ErrBadQuery: %v", raw, err)
			}
			if len(err.Error()) > 1000 {
				t.Fatalf("%q: error of %d bytes", raw, len(err.Error()))
			}
			return
		}
		for k, v := range q {
			if len(v) != 1 {
				t.Fatalf("%q: %s has %d values", raw, k, len(v))
			}
			known := false
			for _, p := range placeParams {
				known = known || p == k
			}
			if !known {
				t.Fatalf("%q: unknown parameter %q accepted", raw, k)
			}
		}
		back, err := ParseQuery(q.Encode(), placeParams...)
		if err != nil || back.Encode() != q.Encode() {
			t.Fatalf("%q: re-encoded %q reads back %v, %v", raw, q.Encode(), back, err)
		}
		if _, err := ParsePlaceQuery(node, q); err != nil && !errors.Is(err, ErrBadQuery) {
			t.Fatalf("%q: place query error without ErrBadQuery: %v", raw, err)
		}
	})
}

func mustNode(f *testing.F) *topology.Node {
	node, err := catalog.Get("dgx-h100")
	if err != nil {
		f.Fatal(err)
	}
	return node
}
