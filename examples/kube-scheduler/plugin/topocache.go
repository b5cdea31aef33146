package plugin

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
	"github.com/gputopo/gputopo/topology/kube"
)

// MaxReasonBytes bounds the reason Filter gives for a node whose
// gputopo.io/topology annotation cannot be used (malformed, oversized,
// beyond a library limit, or a decoder that panicked). The reason is what
// the scheduler puts in the pod's PodScheduled condition and events, once
// per rejecting node, so it must stay short whatever the annotation holds;
// the full cause is logged once per node and annotation value.
const MaxReasonBytes = 256

// MaxLoggedCauseBytes bounds the cause logged when a node's annotation is
// rejected. Library errors are a line or two; this only cuts off a
// pathological one, and the log line then also carries the cause's full
// length.
const MaxLoggedCauseBytes = 16 << 10

// errNoAnnotation is the reason for a node that publishes no topology. It
// names no node, so the scheduler counts such nodes under one reason.
var errNoAnnotation = fmt.Errorf("%w (%s)", kube.ErrNoTopology, kube.AnnotationTopology)

// annotationSentinels are the errors a rejected annotation's short error
// still matches with errors.Is (the long cause itself is not kept).
var annotationSentinels = []error{
	kube.ErrBadAnnotation, kube.ErrTooLarge, topology.ErrLimit, topology.ErrParse,
	topology.ErrInvalidTopology,
}

// annotationError is what the cache keeps for a rejected annotation: the
// bounded reason and the sentinels the cause matched, not the cause.
type annotationError struct {
	reason string
	is     []error
}

func (e *annotationError) Error() string   { return e.reason }
func (e *annotationError) Unwrap() []error { return e.is }

// topoCache holds each node's decoded topology annotation. An annotation
// value is decoded once (the first of the node informer's add/update
// handler or Filter to see it; the others wait for that result), never
// again while the value is unchanged, and a decoder that panics rejects
// the node instead of taking the scheduler down.
//
// Bound: at most two entries per node in the informer's cache (the
// current and the previous annotation value, so that a scheduler snapshot
// still holding the previous value does not make the two alternate);
// deleted nodes are dropped. An entry holds the decoded node, or a reason
// of at most MaxReasonBytes; the value string it keeps is the one the Node
// object holds, not a copy.
type topoCache struct {
	logger klog.Logger
	decode func(string) (*topology.Node, error)

	mu    sync.RWMutex
	nodes map[string]topoSlot
	// shapes registers the distinct shapes of the decoded nodes (shape.go);
	// pruneAt is the size at which it drops shapes no node has.
	shapes  map[shapeKey]*shapeInfo
	pruneAt int
	// gen counts decoded annotation values and forgotten nodes: what the
	// cache knows changes only when gen does (see anyNodeMeetsIdle).
	gen atomic.Uint64
}

type topoSlot struct {
	cur, prev *topoEntry
	// alias is the annotation string of the latest Node object whose
	// value equals aliasOf's but is another copy (a status update
	// delivers a new object): recognising it by its data pointer spares
	// Filter a byte-by-byte comparison of a kilobytes-long annotation.
	alias   string
	aliasOf *topoEntry
}

// sameString reports whether a and b are the same string in memory.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// fast finds the entry of a value held in memory by the slot.
func (s topoSlot) fast(value string) *topoEntry {
	switch {
	case s.cur != nil && sameString(s.cur.value, value):
		return s.cur
	case s.aliasOf != nil && sameString(s.alias, value):
		return s.aliasOf
	case s.prev != nil && sameString(s.prev.value, value):
		return s.prev
	}
	return nil
}

type topoEntry struct {
	value string
	once  sync.Once
	node  *topology.Node
	// compiled is node prepared for selection (scoring.Compile), held here
	// so that the scoring package's bounded handle cache never has to
	// compile a node again in a large cluster.
	compiled *scoring.Compiled
	// shape is shared by the nodes of the same shape and health: which
	// requests they can never meet (shape.go).
	shape *shapeInfo
	err   error
}

func newTopoCache(logger klog.Logger) *topoCache {
	return &topoCache{logger: logger, decode: kube.DecodeAnnotation, nodes: map[string]topoSlot{},
		shapes: map[shapeKey]*shapeInfo{}, pruneAt: 64}
}

// get returns the node's decoded topology, or a short error (at most
// MaxReasonBytes) saying why there is none.
func (c *topoCache) get(node *v1.Node) (*topology.Node, error) {
	e, err := c.entry(node)
	if err != nil {
		return nil, err
	}
	return e.node, nil
}

// compiled returns the node's compiled topology, or get's error.
func (c *topoCache) compiled(node *v1.Node) (*scoring.Compiled, error) {
	e, err := c.entry(node)
	if err != nil {
		return nil, err
	}
	return e.compiled, nil
}

func (c *topoCache) entry(node *v1.Node) (*topoEntry, error) {
	value, ok := node.Annotations[kube.AnnotationTopology]
	if !ok {
		return nil, errNoAnnotation
	}
	c.mu.RLock()
	s := c.nodes[node.Name]
	e := s.fast(value)
	alias := false
	if e == nil {
		e = s.lookup(value)
		alias = e != nil
	}
	c.mu.RUnlock()
	if alias {
		c.mu.Lock()
		if s := c.nodes[node.Name]; s.cur == e || s.prev == e {
			s.alias, s.aliasOf = value, e
			c.nodes[node.Name] = s
		}
		c.mu.Unlock()
	}
	if e == nil {
		c.mu.Lock()
		s := c.nodes[node.Name]
		if e = s.lookup(value); e == nil {
			e = &topoEntry{value: value}
			c.nodes[node.Name] = topoSlot{cur: e, prev: s.cur}
		}
		c.mu.Unlock()
	}
	e.once.Do(func() { c.fill(node.Name, e) })
	return e, e.err
}

func (s topoSlot) lookup(value string) *topoEntry {
	switch {
	case s.cur != nil && s.cur.value == value:
		return s.cur
	case s.prev != nil && s.prev.value == value:
		return s.prev
	}
	return nil
}

// forget drops what the cache holds for a node.
func (c *topoCache) forget(name string) {
	c.mu.Lock()
	delete(c.nodes, name)
	c.mu.Unlock()
	c.gen.Add(1)
}

// len is the number of nodes with an entry (for tests).
func (c *topoCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nodes)
}

// fill decodes e.value into e; it runs once per entry.
func (c *topoCache) fill(name string, e *topoEntry) {
	defer c.gen.Add(1)
	defer func() {
		if r := recover(); r != nil {
			e.node = nil
			e.err = c.reject(name, e.value, fmt.Errorf("%w: the decoder panicked: %v", kube.ErrBadAnnotation, r), debug.Stack())
		}
	}()
	if len(e.value) > kube.MaxAnnotationBytes {
		e.err = c.reject(name, e.value, fmt.Errorf("%w: %w: %d bytes, more than topology/kube.MaxAnnotationBytes (%d)",
			kube.ErrTooLarge, topology.ErrLimit, len(e.value), kube.MaxAnnotationBytes), nil)
		return
	}
	n, err := c.decode(e.value)
	if err != nil {
		e.err = c.reject(name, e.value, err, nil)
		return
	}
	compiled, err := scoring.Compile(n)
	if err != nil {
		e.err = c.reject(name, e.value, err, nil)
		return
	}
	e.node, e.compiled, e.shape = n, compiled, c.shapeOf(n, compiled)
}

// reject logs why a node's annotation is unusable (once: fill runs once per
// node and annotation value) and returns the short error kept for Filter.
// The cause's text is built once and dropped; only the bounded reason and
// the matching sentinels are kept.
func (c *topoCache) reject(name, value string, cause error, stack []byte) error {
	msg := cause.Error()
	out := &annotationError{reason: shorten(msg, MaxReasonBytes)}
	for _, s := range annotationSentinels {
		if errors.Is(cause, s) {
			out.is = append(out.is, s)
		}
	}
	kv := []any{"node", name, "annotation", kube.AnnotationTopology, "annotationBytes", len(value),
		"reason", out.reason, "cause", shorten(msg, MaxLoggedCauseBytes), "causeBytes", len(msg)}
	if stack != nil {
		kv = append(kv, "stack", shorten(string(stack), MaxLoggedCauseBytes))
	}
	c.logger.Error(nil, "Node's topology annotation rejected; the node gets no GPU pods until the annotation changes", kv...)
	return out
}

// shorten returns s cut to at most limit bytes on a rune boundary (with
// "..." when cut), control and invalid characters replaced by '?', so that
// a hostile annotation cannot forge lines in events or logs.
func shorten(s string, limit int) string {
	const ellipsis = "..."
	cut := len(s) > limit
	if cut {
		s = s[:limit-len(ellipsis)]
		for len(s) > 0 {
			r, size := utf8.DecodeLastRuneInString(s)
			if r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1] // a rune cut in two
		}
	}
	// Each replacement is no longer than what it replaces.
	clean := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return '?'
		}
		return r
	}, s)
	if cut {
		clean += ellipsis
	}
	return clean
}

// nodeEventHandler decodes a node's annotation when the node informer
// delivers it, so that Filter finds it decoded, and forgets deleted nodes.
func (c *topoCache) nodeEventHandler() cache.ResourceEventHandler {
	decode := func(obj any) {
		if node, ok := obj.(*v1.Node); ok {
			_, _ = c.get(node) // the outcome is cached (and logged once) for Filter
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    decode,
		UpdateFunc: func(_, obj any) { decode(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				c.forget(node.Name)
			}
		},
	}
}
