package collector_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/examples/exporter/collector"
)

// countingSource answers its reading or error and counts the reads.
type countingSource struct {
	r     *collector.Reading
	err   error
	reads int
}

func (s *countingSource) Read(context.Context) (*collector.Reading, error) {
	s.reads++
	return s.r, s.err
}

// clock is a settable time for Collector.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// scrape renders what one scrape of c exports, in the text format, as
// Prometheus would get it.
func scrape(t *testing.T, c *collector.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}

// upValue scrapes c once and returns the value of gputopo_source_up.
func upValue(t *testing.T, c *collector.Collector) string {
	t.Helper()
	text := scrape(t, c)
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "gputopo_source_up "); ok {
			return v
		}
	}
	t.Fatalf("no gputopo_source_up in %s", text)
	return ""
}

// TestRefresh: scrapes within Options.Refresh of the last read reuse it;
// the first scrape at or after Refresh reads again.
func TestRefresh(t *testing.T) {
	src := &countingSource{r: h100Reading(t)}
	c := collector.New(src, collector.Options{Refresh: 10 * time.Second})
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	collector.SetClock(c, clk.now)

	for _, step := range []time.Duration{0, time.Second, 8 * time.Second} { // t = 0, 1, 9 s
		clk.t = clk.t.Add(step)
		assert.Equal(t, 8, testutil.CollectAndCount(c, "gputopo_device_info"))
	}
	assert.Equal(t, 1, src.reads, "reads within Refresh")
	clk.t = clk.t.Add(time.Second) // t = 10 s
	assert.Equal(t, 8, testutil.CollectAndCount(c, "gputopo_device_info"))
	assert.Equal(t, 2, src.reads, "reads once Refresh has passed")

	// ReadNow reads at once, whatever the interval.
	require.NoError(t, c.ReadNow())
	assert.Equal(t, 3, src.reads)
	upValue(t, c)
	assert.Equal(t, 3, src.reads)

	// The last success is the time of the read, as Unix seconds.
	want := "# HELP gputopo_source_last_success_timestamp_seconds Unix time of the last successful read of the device source.\n" +
		"# TYPE gputopo_source_last_success_timestamp_seconds gauge\n" +
		"gputopo_source_last_success_timestamp_seconds 1.76722561e+09\n"
	assert.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "gputopo_source_last_success_timestamp_seconds"))
}

// TestReadFailureLoggedOnce: a source failing the same way on every read
// is logged once; a different failure, or a failure after a success, is
// logged again. Without KeepLastGood a failed read exports no device
// series; with it, the last good reading's.
func TestReadFailureLoggedOnce(t *testing.T) {
	for _, keep := range []bool{false, true} {
		src := &countingSource{r: h100Reading(t)}
		var logged []error
		c := collector.New(src, collector.Options{KeepLastGood: keep, ErrorLog: func(err error) { logged = append(logged, err) }})
		assert.Equal(t, "1", upValue(t, c))

		src.r, src.err = nil, errors.New("file is broken")
		for range 5 {
			assert.Equal(t, "0", upValue(t, c))
		}
		want := 0
		if keep {
			want = 8
		}
		assert.Equal(t, want, testutil.CollectAndCount(c, "gputopo_device_info"), "KeepLastGood %v", keep)
		assert.Equal(t, 1, testutil.CollectAndCount(c, "gputopo_source_last_success_timestamp_seconds"))
		require.Len(t, logged, 1, "KeepLastGood %v", keep)
		assert.ErrorIs(t, logged[0], src.err)
		assert.Equal(t, keep, strings.Contains(logged[0].Error(), "last good reading"), logged[0].Error())

		src.err = errors.New("file is gone")
		upValue(t, c)
		upValue(t, c)
		require.Len(t, logged, 2)
		assert.ErrorIs(t, logged[1], src.err)

		src.r, src.err = h100Reading(t), nil
		assert.Equal(t, "1", upValue(t, c))
		src.r, src.err = nil, errors.New("file is gone")
		upValue(t, c)
		require.Len(t, logged, 3, "a failure after a success is logged")
		assert.Equal(t, 12, src.reads, "one read per scrape (Refresh 0)")
	}
}

// TestDerivedMetricsReused: scrapes of one reading export what a fresh
// collector would, and a new reading replaces it.
func TestDerivedMetricsReused(t *testing.T) {
	// A stopped clock, so that the source's read time and duration are
	// the same in both collectors.
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src := &countingSource{r: h100Reading(t)}
	c := collector.New(src, collector.Options{})
	collector.SetClock(c, clk.now)
	other := collector.New(&countingSource{r: src.r}, collector.Options{})
	collector.SetClock(other, clk.now)
	want := scrape(t, other)
	require.Contains(t, want, "gputopo_mig_free_placements")
	for range 3 {
		assert.Equal(t, want, scrape(t, c))
	}
	src.r = &collector.Reading{Node: node(t, "mi250x-8gcd")}
	assert.Equal(t, 0, testutil.CollectAndCount(c, "gputopo_mig_free_placements"))
	assert.Equal(t, 8, testutil.CollectAndCount(c, "gputopo_device_info"))
}

// BenchmarkCollect: one scrape of a DGX H100 reading, when the reading is
// the one of the previous scrape (derived metrics reused) and when every
// scrape brings a new one (derived again).
func BenchmarkCollect(b *testing.B) {
	r := h100Reading(b)
	for _, fresh := range []bool{false, true} {
		name := "same-reading"
		if fresh {
			name = "new-reading"
		}
		b.Run(name, func(b *testing.B) {
			src := collector.SourceFunc(func(context.Context) (*collector.Reading, error) {
				if fresh {
					cp := *r
					return &cp, nil
				}
				return r, nil
			})
			c := collector.New(src, collector.Options{})
			ch := make(chan prometheus.Metric, 256)
			b.ReportAllocs()
			for b.Loop() {
				c.Collect(ch)
				for len(ch) > 0 {
					<-ch
				}
			}
		})
	}
}
