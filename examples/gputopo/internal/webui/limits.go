package webui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrTooLarge: an answer is larger than Limits.MaxResponseBytes. It is
// answered with HTTP status 507 and a message naming the bound.
var ErrTooLarge = errors.New("answer too large")

// ErrBusy: Limits.MaxInFlight API requests are being answered and this one
// waited Limits.QueueWait for a turn. It is answered with HTTP status 503
// and a Retry-After header.
var ErrBusy = errors.New("server busy")

// Limits bounds what the server spends on its API. The zero value of a
// field means its default (DefaultLimits).
type Limits struct {
	// MaxInFlight is how many API requests are answered at once; the
	// others wait up to QueueWait for a turn, then get ErrBusy.
	MaxInFlight int
	// QueueWait is how long a request waits for a turn.
	QueueWait time.Duration
	// MaxResponseBytes bounds one answer's JSON; a larger one is
	// ErrTooLarge (the answer is not sent).
	MaxResponseBytes int
	// MaxCachedBytes bounds the answers kept for reuse, all together.
	MaxCachedBytes int
	// ComputeTimeout bounds the work behind one answer (a gang check):
	// beyond it the answer is an error, not cached.
	ComputeTimeout time.Duration
}

// DefaultLimits are the limits a zero Limits means. A gang answer on a
// cluster of gang.MaxNodes DGX nodes is about 10 MB.
var DefaultLimits = Limits{
	MaxInFlight:      8,
	QueueWait:        10 * time.Second,
	MaxResponseBytes: 32 << 20,
	MaxCachedBytes:   96 << 20,
	ComputeTimeout:   20 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxInFlight > 0 {
		d.MaxInFlight = l.MaxInFlight
	}
	if l.QueueWait > 0 {
		d.QueueWait = l.QueueWait
	}
	if l.MaxResponseBytes > 0 {
		d.MaxResponseBytes = l.MaxResponseBytes
	}
	if l.MaxCachedBytes > 0 {
		d.MaxCachedBytes = l.MaxCachedBytes
	}
	if l.ComputeTimeout > 0 {
		d.ComputeTimeout = l.ComputeTimeout
	}
	return d
}

// MaxQueryBytes bounds a request's raw query string.
const MaxQueryBytes = 16 << 10

// ParseQuery reads a raw query string strictly: every pair must decode,
// pairs are separated by '&' only, each parameter is one of allowed and
// appears at most once. Errors wrap ErrBadQuery and name the parameter.
func ParseQuery(raw string, allowed ...string) (url.Values, error) {
	if len(raw) > MaxQueryBytes {
		return nil, fmt.Errorf("%w: query of %d bytes: more than %d", ErrBadQuery, len(raw), MaxQueryBytes)
	}
	q := url.Values{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return nil, fmt.Errorf("%w: %.100q: parameters are separated by '&', not ';'", ErrBadQuery, pair)
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %.100q does not decode: %w", ErrBadQuery, k, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %.100q: value %.100q does not decode: %w", ErrBadQuery, key, v, err)
		}
		known := false
		for _, a := range allowed {
			known = known || a == key
		}
		if !known {
			if len(allowed) == 0 {
				return nil, fmt.Errorf("%w: unknown parameter %.100q (this endpoint takes none)", ErrBadQuery, key)
			}
			return nil, fmt.Errorf("%w: unknown parameter %.100q (want one of %s)", ErrBadQuery, key, strings.Join(allowed, ", "))
		}
		if q.Has(key) {
			return nil, fmt.Errorf("%w: parameter %.100q given twice", ErrBadQuery, key)
		}
		q.Set(key, val)
	}
	return q, nil
}

// answer is one encoded API answer: its status and JSON body.
type answer struct {
	once sync.Once
	reply
	done bool // under the cache's lock
}

// answerCache keeps encoded answers by key, computed once each (callers
// asking for a key being computed wait for it), within a byte budget.
type answerCache struct {
	mu       sync.Mutex
	m        map[string]*answer
	bytes    int
	maxBytes int
}

// maxCacheEntries bounds the keys kept (place queries vary).
const maxCacheEntries = 1024

func (c *answerCache) get(key string, compute func() (reply, bool)) reply {
	c.mu.Lock()
	a := c.m[key]
	if a == nil {
		if c.m == nil {
			c.m = map[string]*answer{}
		}
		if len(c.m) >= maxCacheEntries {
			c.evictLocked(1)
		}
		a = &answer{}
		c.m[key] = a
	}
	c.mu.Unlock()
	a.once.Do(func() {
		var ok bool
		a.reply, ok = compute()
		c.mu.Lock()
		defer c.mu.Unlock()
		if !ok || len(a.body) > c.maxBytes {
			if c.m[key] == a {
				delete(c.m, key)
			}
			return
		}
		a.done = true
		c.bytes += len(a.body)
		if c.bytes > c.maxBytes {
			c.evictLocked(c.bytes - c.maxBytes)
		}
	})
	return a.reply
}

// evictLocked drops finished answers (any, map order) until need bytes or
// one entry are freed.
func (c *answerCache) evictLocked(need int) {
	freed, n := 0, 0
	for k, a := range c.m {
		if freed >= need && n > 0 {
			return
		}
		if !a.done {
			continue
		}
		delete(c.m, k)
		c.bytes -= len(a.body)
		freed += len(a.body)
		n++
	}
}

// encode returns v's JSON (compact), or an error answer when it is
// larger than max.
func encode(v any, max int) reply {
	b, err := json.Marshal(v)
	if err != nil {
		return errorAnswer(err)
	}
	if len(b) > max {
		return errorAnswer(fmt.Errorf("%w: the answer is %d bytes, more than the server's bound of %d (gputopo serve --max-response-mb raises it)", ErrTooLarge, len(b), max))
	}
	return reply{200, append(b, '\n')}
}

// keep reports whether an answer with err may be reused: not when the
// work was cut short by a deadline or a cancellation.
func keep(err error) bool {
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}
