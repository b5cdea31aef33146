package simulate

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// MaxGPUsPerNode is the largest GPU count a node or a pod may have.
const MaxGPUsPerNode = 64

// Milli is the capacity of one whole GPU in milli-GPU.
const Milli = 1000

// Node is one machine of a node list (openb_node_list_*.csv).
type Node struct {
	Name        string
	CPUMilli    int64  // CPU, milli-cores
	MemoryBytes int64  // main memory, bytes (the trace's memory_mib × 2^20)
	GPUs        int    // GPU count; 0 for a CPU-only node
	Model       string // GPU model; empty for a CPU-only node
	// Topology, when set, is the node's machine (for example from package
	// provider/catalog), with GPUs devices: a pod of several whole GPUs
	// placed there takes the devices scoring.SelectDevices chooses, and
	// its Placement records the bandwidth it got ([PodBandwidth]). The
	// CSV readers leave it nil.
	Topology *topology.Node
}

// Pod is one task of a pod list (openb_pod_list_*.csv).
type Pod struct {
	Name        string
	CPUMilli    int64  // CPU request, milli-cores
	MemoryBytes int64  // memory request, bytes (the trace's memory_mib × 2^20)
	GPUs        int    // GPU count
	GPUMilli    int64  // request per GPU, milli-GPU: 0 for CPU-only pods, <1000 for GPU-sharing pods
	Models      string // accepted GPU models "A|B" (the trace's gpu_spec); empty = any
}

// TotalGPUMilli returns the pod's whole GPU request, GPUs·GPUMilli.
func (p Pod) TotalGPUMilli() int64 { return int64(p.GPUs) * p.GPUMilli }

// Sharing reports whether the pod takes a fraction of one GPU.
func (p Pod) Sharing() bool { return p.GPUs == 1 && p.GPUMilli < Milli }

// Limits of [ReadNodes] and [ReadPods] (the Limits table of the package
// documentation). Input beyond them is a
// [*ParseError] wrapping [ErrParse] and topology.ErrLimit, found while
// streaming: at most maxLineBytes of one line (plus small buffers) is held
// before it is checked, whatever the input's size.
const (
	// maxLineBytes bounds one line (the trace's lines are about 100 bytes).
	maxLineBytes = 64 << 10
	// maxColumns bounds the header's columns (the trace has 11).
	maxColumns = 256
	// maxRows bounds the rows after the header (the trace has 8,152 pods).
	maxRows = 1 << 20
	// maxCSVBytes bounds the whole input.
	maxCSVBytes = 256 << 20
)

// The limits the reader checks; tests lower them.
var (
	rowLimit     = maxRows
	csvByteLimit = int64(maxCSVBytes)
)

// quoteMax bounds what an error message quotes of the input.
const quoteMax = 64

// quote quotes s for an error message, at most quoteMax bytes of it.
func quote(s string) string {
	if len(s) > quoteMax {
		return fmt.Sprintf("%q... (%d bytes)", s[:quoteMax], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// ParseError is a problem in one line of a CSV input. It matches
// [ErrParse] with errors.Is and unwraps to its cause.
type ParseError struct {
	Line   int    // 1-based line of the input (the header is line 1)
	Column string // column at fault, empty when the whole row is
	Err    error  // the cause
}

// Error says where and what: "line 12: column gpu_milli: ...".
func (e *ParseError) Error() string {
	if e.Column != "" {
		return fmt.Sprintf("line %d: column %s: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Is reports whether target is ErrParse.
func (e *ParseError) Is(target error) bool { return target == ErrParse }

// boundedReader passes its input through, failing once the input passes
// csvByteLimit or a line passes maxLineBytes; it remembers the reader's own
// error so that it is reported as a read error, not a parse error.
type boundedReader struct {
	r      io.Reader
	total  int64
	line   int // bytes since the last newline
	lines  int // newlines seen
	err    error
	ioErr  error
	limErr error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	for i, c := range p[:n] {
		b.total++
		if c == '\n' {
			b.lines++
			b.line = 0
		} else {
			b.line++
		}
		switch {
		case b.total > csvByteLimit:
			b.limErr = &ParseError{Line: b.lines + 1, Err: fmt.Errorf("input longer than simulate limit maxCSVBytes (%d bytes): %w", csvByteLimit, topology.ErrLimit)}
		case b.line > maxLineBytes:
			b.limErr = &ParseError{Line: b.lines + 1, Err: fmt.Errorf("line longer than simulate limit maxLineBytes (%d bytes): %w", maxLineBytes, topology.ErrLimit)}
		default:
			continue
		}
		b.err = b.limErr
		return i, b.err
	}
	if err != nil && err != io.EOF {
		b.ioErr, b.err = err, err
	}
	return n, err
}

// table reads a header-led CSV and hands each row to fn with a column
// accessor. required names the columns that must be present.
type table struct {
	ctx    context.Context
	in     *boundedReader
	r      *csv.Reader
	col    map[string]int
	line   int
	rows   int
	record []string
}

func newTable(ctx context.Context, in io.Reader, required ...string) (*table, error) {
	if in == nil {
		return nil, fmt.Errorf("%w: a nil reader", ErrRead)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	br := &boundedReader{r: in}
	buf := bufio.NewReader(br)
	if bom, err := buf.Peek(3); err == nil && string(bom) == "\xef\xbb\xbf" {
		_, _ = buf.Discard(3)
	}
	r := csv.NewReader(buf)
	r.ReuseRecord = true
	t := &table{ctx: ctx, in: br, r: r, col: map[string]int{}, line: 1}
	header, err := r.Read()
	if err == io.EOF {
		return nil, &ParseError{Line: 1, Err: errors.New("empty input, want a header line")}
	}
	if err != nil {
		return nil, t.readError(err)
	}
	if len(header) > maxColumns {
		return nil, &ParseError{Line: 1, Err: fmt.Errorf("header has %d columns, more than simulate limit maxColumns (%d): %w", len(header), maxColumns, topology.ErrLimit)}
	}
	for i, h := range header {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, dup := t.col[h]; dup {
			return nil, &ParseError{Line: 1, Column: truncate(h), Err: errors.New("column appears twice")}
		}
		t.col[h] = i
	}
	for _, name := range required {
		if _, ok := t.col[name]; !ok {
			return nil, &ParseError{Line: 1, Column: name, Err: fmt.Errorf("missing column %s (header of %d columns: %s)", name, len(header), quote(strings.Join(header, ",")))}
		}
	}
	return t, nil
}

// truncate shortens a name used as ParseError.Column.
func truncate(s string) string {
	if len(s) > quoteMax {
		return s[:quoteMax] + "..."
	}
	return s
}

// readError turns an error of the csv reader into ours: the input's own
// read error wraps ErrRead, a limit the bounded reader hit is its
// ParseError, a CSV syntax error a ParseError.
func (t *table) readError(err error) error {
	switch {
	case t.in.limErr != nil:
		return t.in.limErr
	case t.in.ioErr != nil:
		return fmt.Errorf("%w: after line %d: %w", ErrRead, t.line, t.in.ioErr)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{Line: pe.Line, Err: pe.Err}
	}
	return &ParseError{Line: t.line, Err: err}
}

// ctxRows is how many rows the readers parse between two looks at their
// context (a few hundred microseconds of work).
const ctxRows = 1024

// next advances to the next row; it returns false at the end, and the
// context's error once it is done.
func (t *table) next() (bool, error) {
	if t.rows%ctxRows == 0 {
		if err := t.ctx.Err(); err != nil {
			return false, fmt.Errorf("simulate: reading CSV stopped after line %d: %w", t.line, err)
		}
	}
	rec, err := t.r.Read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, t.readError(err)
	}
	t.record = rec
	t.line, _ = t.r.FieldPos(0)
	if t.rows++; t.rows > rowLimit {
		return false, &ParseError{Line: t.line, Err: fmt.Errorf("more than simulate limit maxRows (%d) rows: %w", rowLimit, topology.ErrLimit)}
	}
	return true, nil
}

func (t *table) has(name string) bool { _, ok := t.col[name]; return ok }

func (t *table) str(name string) string {
	i, ok := t.col[name]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.record[i])
}

func (t *table) errf(col, format string, a ...any) error {
	return &ParseError{Line: t.line, Column: col, Err: fmt.Errorf(format, a...)}
}

// int reads a non-negative integer column no larger than limit.
func (t *table) int(name string, limit int64) (int64, error) {
	s := t.str(name)
	if s == "" {
		return 0, t.errf(name, "empty value")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// pandas writes integers of a column holding NaN as "12.0"
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) || f < -1e18 || f > 1e18 {
			return 0, t.errf(name, "%s is not an integer", quote(s))
		}
		v = int64(f)
	}
	if v < 0 || v > limit {
		return 0, t.errf(name, "%d outside 0..%d", v, limit)
	}
	return v, nil
}

// field limits: generous bounds that keep sums far from overflow.
const (
	maxCPUMilli  = 1 << 32 // 4 million cores
	maxMemoryMiB = 1 << 40 // 1 EiB, 2^60 bytes
)

// mib is one MiB in bytes: the trace's memory_mib columns are in MiB.
const mib = 1 << 20

// ReadNodes reads a node list in the trace's CSV form: a header with at
// least the columns sn, cpu_milli, memory_mib, gpu and model (any order;
// other columns are ignored), then one node per line. memory_mib is
// converted to [Node.MemoryBytes]. Nodes with gpu 0 are CPU-only and must
// have an empty model; GPU nodes must name one. Node names must be unique.
// Errors are [*ParseError]s wrapping [ErrParse] (and topology.ErrLimit past
// a limit in the package's Limits table), or wrap [ErrRead] when in fails.
// It looks at ctx every 1,024 rows and returns its error once it is done
// (a Read of in that blocks is not interrupted).
func ReadNodes(ctx context.Context, in io.Reader) ([]Node, error) {
	t, err := newTable(ctx, in, "sn", "cpu_milli", "memory_mib", "gpu", "model")
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	var out []Node
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		var n Node
		if n.Name = t.str("sn"); n.Name == "" {
			return nil, t.errf("sn", "empty node name")
		}
		if prev, dup := seen[n.Name]; dup {
			return nil, t.errf("sn", "node %s already on line %d", quote(n.Name), prev)
		}
		seen[n.Name] = t.line
		if n.CPUMilli, err = t.int("cpu_milli", maxCPUMilli); err != nil {
			return nil, err
		}
		if n.MemoryBytes, err = t.int("memory_mib", maxMemoryMiB); err != nil {
			return nil, err
		}
		n.MemoryBytes *= mib
		g, err := t.int("gpu", MaxGPUsPerNode)
		if err != nil {
			return nil, err
		}
		n.GPUs = int(g)
		n.Model = t.str("model")
		if strings.EqualFold(n.Model, "nan") {
			n.Model = ""
		}
		switch {
		case n.GPUs > 0 && n.Model == "":
			return nil, t.errf("model", "node has %d GPUs but no GPU model", n.GPUs)
		case n.GPUs == 0 && n.Model != "":
			return nil, t.errf("model", "node has GPU model %s but no GPUs", quote(n.Model))
		case strings.Contains(n.Model, "|"):
			return nil, t.errf("model", "GPU model %s contains '|'", quote(n.Model))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, &ParseError{Line: t.line, Err: errors.New("no nodes")}
	}
	return out, nil
}

// ReadPods reads a pod list in the trace's CSV form: a header with at least
// name, cpu_milli, memory_mib, num_gpu and gpu_milli (the 5-column variant
// of the multigpu lists), optionally gpu_spec; other columns (qos,
// pod_phase, times) are ignored, as the paper's experiment ignores them.
// memory_mib is converted to [Pod.MemoryBytes]. gpu_milli is the share of
// each GPU: 0 when num_gpu is 0, 1..1000 when num_gpu is 1, exactly 1000
// when num_gpu is more. Pod names must be unique. Errors, and how ctx is
// honoured, are as [ReadNodes]'s.
func ReadPods(ctx context.Context, in io.Reader) ([]Pod, error) {
	t, err := newTable(ctx, in, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
	if err != nil {
		return nil, err
	}
	spec := t.has("gpu_spec")
	seen := map[string]int{}
	var out []Pod
	for {
		ok, err := t.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		var p Pod
		if p.Name = t.str("name"); p.Name == "" {
			return nil, t.errf("name", "empty pod name")
		}
		if prev, dup := seen[p.Name]; dup {
			return nil, t.errf("name", "pod %s already on line %d", quote(p.Name), prev)
		}
		seen[p.Name] = t.line
		if p.CPUMilli, err = t.int("cpu_milli", maxCPUMilli); err != nil {
			return nil, err
		}
		if p.MemoryBytes, err = t.int("memory_mib", maxMemoryMiB); err != nil {
			return nil, err
		}
		p.MemoryBytes *= mib
		g, err := t.int("num_gpu", MaxGPUsPerNode)
		if err != nil {
			return nil, err
		}
		p.GPUs = int(g)
		if p.GPUMilli, err = t.int("gpu_milli", maxCPUMilli); err != nil {
			return nil, err
		}
		switch {
		case p.GPUs == 0 && p.GPUMilli != 0:
			return nil, t.errf("gpu_milli", "%d milli-GPU asked with num_gpu 0", p.GPUMilli)
		case p.GPUs == 1 && (p.GPUMilli < 1 || p.GPUMilli > Milli):
			return nil, t.errf("gpu_milli", "%d outside 1..%d for a one-GPU pod", p.GPUMilli, Milli)
		case p.GPUs > 1 && p.GPUMilli != Milli:
			return nil, t.errf("gpu_milli", "%d with num_gpu %d: multi-GPU pods take whole GPUs (1000)", p.GPUMilli, p.GPUs)
		}
		if spec {
			var models []string
			for m := range strings.SplitSeq(t.str("gpu_spec"), "|") {
				if m = strings.TrimSpace(m); m != "" && !strings.EqualFold(m, "nan") {
					models = append(models, m)
				}
			}
			if len(models) > 0 && p.GPUs == 0 {
				return nil, t.errf("gpu_spec", "GPU model constraint on a pod without GPUs")
			}
			p.Models = strings.Join(models, "|")
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, &ParseError{Line: t.line, Err: errors.New("no pods")}
	}
	return out, nil
}
