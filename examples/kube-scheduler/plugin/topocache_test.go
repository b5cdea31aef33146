package plugin

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"pgregory.net/rapid"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// logEntry is one line logged through a recordingSink.
type logEntry struct {
	msg string
	kv  map[string]any
}

// recordingSink is a klog.LogSink that keeps every line, at every level.
type recordingSink struct {
	mu      *sync.Mutex
	entries *[]logEntry
	values  []any
}

func newRecordingLogger() (klog.Logger, *recordingSink) {
	s := &recordingSink{mu: &sync.Mutex{}, entries: &[]logEntry{}}
	return klog.New(s), s
}

func (s *recordingSink) Init(klog.RuntimeInfo)        {}
func (s *recordingSink) Enabled(int) bool             { return true }
func (s *recordingSink) WithName(string) klog.LogSink { return s }
func (s *recordingSink) WithValues(kv ...any) klog.LogSink {
	c := *s
	c.values = append(append([]any{}, s.values...), kv...)
	return &c
}
func (s *recordingSink) Info(_ int, msg string, kv ...any) { s.record(msg, kv) }
func (s *recordingSink) Error(_ error, msg string, kv ...any) {
	s.record(msg, kv)
}

func (s *recordingSink) record(msg string, kv []any) {
	m := map[string]any{}
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		m[fmt.Sprint(all[i])] = all[i+1]
	}
	s.mu.Lock()
	*s.entries = append(*s.entries, logEntry{msg, m})
	s.mu.Unlock()
}

// about returns the lines logged about a node.
func (s *recordingSink) about(node string) []logEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logEntry
	for _, e := range *s.entries {
		if e.kv["node"] == node {
			out = append(out, e)
		}
	}
	return out
}

func loggingPlugin(t *testing.T) (*Plugin, *recordingSink) {
	t.Helper()
	logger, sink := newRecordingLogger()
	p, err := New(klog.NewContext(context.Background(), logger), nil, nil)
	require.NoError(t, err)
	return p.(*Plugin), sink
}

func v1z(raw []byte) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return kube.EncodingV1 + base64.RawStdEncoding.EncodeToString(buf.Bytes())
}

// hostileAnnotation is a well-formed annotation (gzip, base64, JSON of
// the right schema) declaring n devices and no links: about 10 KB for
// 3,000 devices. A decoder without a device limit validates every pair of
// devices and reports each missing link, millions of errors.
func hostileAnnotation(n int) string {
	var doc strings.Builder
	doc.WriteString(`{"schema":"gputopo/v1","devices":[`)
	for i := range n {
		if i > 0 {
			doc.WriteByte(',')
		}
		fmt.Fprintf(&doc, `{"index":%d}`, i)
	}
	doc.WriteString(`],"links":[]}`)
	return v1z([]byte(doc.String()))
}

func annotatedNode(name, value string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kube.AnnotationTopology: value}}}
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestFilterRejectsBadAnnotations: a node whose annotation is malformed,
// oversized or hostile is filtered out with a bounded reason, logged once
// however often Filter asks, within a bounded amount of memory, and a
// good node next to it is unaffected.
func TestFilterRejectsBadAnnotations(t *testing.T) {
	hostile := hostileAnnotation(3000)
	t.Logf("hostile annotation: %d bytes for 3,000 devices", len(hostile))
	require.Less(t, len(hostile), 16<<10, "the hostile case must stay small")

	cases := []struct {
		name, value string
		want        string // in the reason
		is          error
		decodeBytes uint64 // allocation bound for the first Filter (the decode)
	}{
		{"not base64", kube.EncodingV1 + "!!!not base64!!!", "base64", kube.ErrBadAnnotation, 64 << 10},
		{"not gzip", kube.EncodingV1 + base64.RawStdEncoding.EncodeToString([]byte("plain bytes, no gzip header")), "gzip", kube.ErrBadAnnotation, 64 << 10},
		{"not JSON", v1z([]byte("{this is not JSON")), "JSON", kube.ErrBadAnnotation, 64 << 10},
		{"wrong schema", v1z([]byte(`{"schema":"other/v9"}`)), "other/v9", topology.ErrParse, 64 << 10},
		{"unknown encoding", "v9x:" + strings.Repeat("\x00\n", 100), "unknown encoding", kube.ErrBadAnnotation, 64 << 10},
		{"control characters", "{\"schema\":\"gputopo/v1\",\n\"devices\":[{\"index\":0,\"model\":\"\x1b[31m\"}]}", "", kube.ErrBadAnnotation, 64 << 10},
		{"oversized", kube.EncodingV1 + strings.Repeat("A", kube.MaxAnnotationBytes), "too large", topology.ErrLimit, 4 << 10},
		// Relies on the decoders refusing more than topology.MaxDevices
		// before allocating; without that, this case allocates about 5 GB.
		{"hostile: 3,000 devices, no links", hostile, "MaxDevices", topology.ErrLimit, 4 << 20},
	}
	dgx, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	const calls = 1000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, logs := loggingPlugin(t)
			pod := gpuPod("p", 2, nil)
			state := newState()
			_, st := p.PreFilter(context.Background(), state, pod, nil)
			require.True(t, st.IsSuccess(), "%v", st)
			good := fakeNodeInfo{node: nodeObj(t, "good", dgx)}
			bad := fakeNodeInfo{node: annotatedNode("bad", tc.value)}

			// A throwaway plugin decodes the annotation first: what the
			// process sets up once (compress/flate's fixed Huffman tables,
			// on the first such stream) is not the decode's cost.
			warm, _ := loggingPlugin(t)
			warmState := newState()
			_, _ = warm.PreFilter(context.Background(), warmState, pod, nil)
			_ = warm.Filter(context.Background(), warmState, pod, bad)

			before := totalAlloc()
			st = p.Filter(context.Background(), state, pod, bad)
			decoded := totalAlloc() - before
			require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "%v", st)
			reason := st.Message()
			assert.LessOrEqual(t, len(reason), MaxReasonBytes)
			assert.Contains(t, reason, tc.want)
			assert.True(t, utf8.ValidString(reason))
			assert.False(t, strings.ContainsFunc(reason, unicode.IsControl), "reason %q has control characters", reason)
			assert.LessOrEqual(t, decoded, tc.decodeBytes, "the decode allocated %d bytes", decoded)

			before = totalAlloc()
			for range calls {
				st = p.Filter(context.Background(), state, pod, bad)
				if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != reason {
					require.Failf(t, "Filter changed its answer", "%v", st)
				}
			}
			perCall := (totalAlloc() - before) / calls
			assert.LessOrEqual(t, perCall, uint64(1<<10), "Filter on a rejected node allocates %d bytes a call", perCall)

			for range 10 {
				require.True(t, p.Filter(context.Background(), state, pod, good).IsSuccess(), "the good node was affected")
			}
			_, err := p.topology(bad.node)
			assert.ErrorIs(t, err, tc.is)

			lines := logs.about("bad")
			require.Len(t, lines, 1, "the rejection must be logged once")
			assert.Equal(t, reason, lines[0].kv["reason"])
			assert.Equal(t, len(tc.value), lines[0].kv["annotationBytes"])
			cause, _ := lines[0].kv["cause"].(string)
			assert.LessOrEqual(t, len(cause), MaxLoggedCauseBytes)
			assert.Empty(t, logs.about("good"))
			t.Logf("reason (%d bytes): %s; decode allocated %d bytes, then %d bytes a Filter call", len(reason), reason, decoded, perCall)
		})
	}
}

// TestTopologyDecodedOncePerValue: the informer's handlers decode a
// node's annotation when it arrives or changes, Filter finds it decoded,
// a snapshot still holding the previous value does not decode it again,
// and a deleted node is forgotten.
func TestTopologyDecodedOncePerValue(t *testing.T) {
	p, logs := loggingPlugin(t)
	decodes := map[string]int{}
	var mu sync.Mutex
	p.topos.decode = func(v string) (*topology.Node, error) {
		mu.Lock()
		decodes[v]++
		mu.Unlock()
		return kube.DecodeAnnotation(v)
	}
	dgx, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	good := nodeObj(t, "n", dgx)
	h := p.topos.nodeEventHandler()
	h.OnAdd(good, true)
	goodValue := good.Annotations[kube.AnnotationTopology]
	assert.Equal(t, 1, decodes[goodValue])

	pod := gpuPod("p", 2, nil)
	state := newState()
	p.PreFilter(context.Background(), state, pod, nil)
	for range 50 {
		require.True(t, p.Filter(context.Background(), state, pod, fakeNodeInfo{node: good}).IsSuccess())
	}
	h.OnUpdate(good, good.DeepCopy()) // a status heartbeat: same annotation
	assert.Equal(t, 1, decodes[goodValue], "an unchanged annotation was decoded again")

	broken := annotatedNode("n", kube.EncodingV1+"%%%")
	h.OnUpdate(good, broken)
	for range 50 {
		st := p.Filter(context.Background(), state, pod, fakeNodeInfo{node: broken})
		require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
		// The scheduler's snapshot may still hold the previous value.
		require.True(t, p.Filter(context.Background(), state, pod, fakeNodeInfo{node: good}).IsSuccess())
	}
	assert.Equal(t, 1, decodes[goodValue])
	assert.Equal(t, 1, decodes[broken.Annotations[kube.AnnotationTopology]])
	assert.Len(t, logs.about("n"), 1)

	// Back to a good value, then broken again: a new version of the
	// annotation is logged again, once.
	h.OnUpdate(broken, good)
	other := annotatedNode("n", kube.EncodingV1+"###")
	h.OnUpdate(good, other)
	for range 10 {
		p.Filter(context.Background(), state, pod, fakeNodeInfo{node: other})
	}
	assert.Len(t, logs.about("n"), 2)

	assert.Equal(t, 1, p.topos.len())
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "n", Obj: other})
	assert.Equal(t, 0, p.topos.len(), "a deleted node's entry was kept")

	// A node without the annotation is rejected with one shared reason
	// that names no node.
	bare := fakeNodeInfo{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare-node-name"}}}
	st := p.Filter(context.Background(), state, pod, bare)
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.NotContains(t, st.Message(), "bare-node-name")
	assert.Contains(t, st.Message(), kube.AnnotationTopology)
}

// TestTopologyDecoderPanic: a decoder that panics (on whatever input)
// rejects that node with a bounded reason instead of taking the
// scheduler down; other nodes are unaffected.
func TestTopologyDecoderPanic(t *testing.T) {
	p, logs := loggingPlugin(t)
	dgx, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	good := nodeObj(t, "good", dgx)
	p.topos.decode = func(v string) (*topology.Node, error) {
		if v == "boom" {
			panic(strings.Repeat("a very long panic message\n", 100_000))
		}
		return kube.DecodeAnnotation(v)
	}
	pod := gpuPod("p", 1, nil)
	state := newState()
	p.PreFilter(context.Background(), state, pod, nil)
	bad := fakeNodeInfo{node: annotatedNode("bad", "boom")}
	var st *fwk.Status
	require.NotPanics(t, func() {
		p.topos.nodeEventHandler().OnAdd(bad.node, false)
		st = p.Filter(context.Background(), state, pod, bad)
	})
	assert.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	assert.Contains(t, st.Message(), "panicked")
	assert.LessOrEqual(t, len(st.Message()), MaxReasonBytes)
	assert.True(t, p.Filter(context.Background(), state, pod, fakeNodeInfo{node: good}).IsSuccess())
	lines := logs.about("bad")
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0].kv, "stack")
}

// TestShorten: the reason is at most the limit, valid UTF-8 without
// control characters, and the input itself when it fits and is clean.
func TestShorten(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		if rapid.Bool().Draw(t, "invalid") {
			s += string([]byte{0xff, 0xe2, 0x82})
		}
		limit := rapid.IntRange(8, 300).Draw(t, "limit")
		got := shorten(s, limit)
		if len(got) > limit {
			t.Fatalf("shorten(%q, %d) = %q: %d bytes", s, limit, got, len(got))
		}
		if !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) {
			t.Fatalf("shorten(%q, %d) = %q", s, limit, got)
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' || r == utf8.RuneError })
		if clean && len(s) <= limit && got != s {
			t.Fatalf("shorten(%q, %d) = %q, want it unchanged", s, limit, got)
		}
	})
	assert.Equal(t, "abc...", shorten("abcdefghij", 6))
	assert.Equal(t, "a?b", shorten("a\nb", 10))
	assert.Equal(t, "h...", shorten("héllo", 5), "a rune cut in two is dropped")
}

// TestTopologyConcurrentFilters: Filter runs on many nodes at once (and
// the informer's handler next to it); each annotation value is still
// decoded once and each rejection logged once.
func TestTopologyConcurrentFilters(t *testing.T) {
	p, logs := loggingPlugin(t)
	var mu sync.Mutex
	decodes := map[string]int{}
	p.topos.decode = func(v string) (*topology.Node, error) {
		mu.Lock()
		decodes[v]++
		mu.Unlock()
		return kube.DecodeAnnotation(v)
	}
	dgx, err := catalog.Get("dgx1-v100")
	require.NoError(t, err)
	nodes := []*v1.Node{
		nodeObj(t, "good", dgx),
		annotatedNode("malformed", kube.EncodingV1+"***"),
		annotatedNode("oversized", strings.Repeat("{", kube.MaxAnnotationBytes+1)),
	}
	pod := gpuPod("p", 2, nil)
	state := newState()
	p.PreFilter(context.Background(), state, pod, nil)
	h := p.topos.nodeEventHandler()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := nodes[(w+i)%len(nodes)]
				if i%50 == 0 {
					h.OnUpdate(n, n)
				}
				st := p.Filter(context.Background(), state, pod, fakeNodeInfo{node: n})
				if n.Name == "good" != st.IsSuccess() {
					t.Errorf("node %s: %v", n.Name, st)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		want := 1
		if n.Name == "oversized" {
			want = 0 // refused by its size before the decoder sees it
		}
		assert.Equal(t, want, decodes[n.Annotations[kube.AnnotationTopology]], "decodes of node %s", n.Name)
	}
	assert.Len(t, logs.about("malformed"), 1)
	assert.Len(t, logs.about("oversized"), 1)
	assert.Empty(t, logs.about("good"))
}
