package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gputopo/gputopo/internal/hostile"
	"github.com/gputopo/gputopo/topology"
)

// genReader yields prefix, then n bytes of fill, then suffix, without
// holding them: a 50 MB input costs nothing to produce.
type genReader struct {
	prefix, suffix string
	fill           byte
	n              int64
	pos            int64
}

func (g *genReader) Read(p []byte) (int, error) {
	total := int64(len(g.prefix)) + g.n + int64(len(g.suffix))
	if g.pos >= total {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && g.pos < total {
		switch {
		case g.pos < int64(len(g.prefix)):
			p[k] = g.prefix[g.pos]
		case g.pos < int64(len(g.prefix))+g.n:
			p[k] = g.fill
		default:
			p[k] = g.suffix[g.pos-int64(len(g.prefix))-g.n]
		}
		k++
		g.pos++
	}
	return k, nil
}

// allocated returns the bytes f allocates.

// TestHugeLinesCostLittle: a 50 MB header line, or a 50 MB field in a
// row, fails with ErrLimit after reading about maxLineBytes, allocating
// well under a megabyte.
func TestHugeLinesCostLittle(t *testing.T) {
	const size = 50 << 20
	cases := map[string]*genReader{
		"header":       {prefix: "sn,cpu_milli,", fill: 'x', n: size, suffix: "\n"},
		"quoted field": {prefix: nodeHeader + "a,1,1,1,\"", fill: 'y', n: size, suffix: "\"\n"},
		"row":          {prefix: nodeHeader + "a,1,1,1,", fill: 'z', n: size},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := hostile.Allocated(func() { _, err = ReadNodes(context.Background(), in) })
			require.ErrorIs(t, err, ErrParse)
			require.ErrorIs(t, err, topology.ErrLimit)
			require.Contains(t, err.Error(), "simulate limit maxLineBytes")
			require.Less(t, len(err.Error()), 200)
			require.Less(t, alloc, uint64(1<<20), "allocated %d bytes", alloc)
			require.Less(t, in.pos, int64(2*maxLineBytes), "read %d bytes", in.pos)
		})
	}
}

const nodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n"

// TestMissingColumnQuotesLittle: the missing-column error names the column
// and quotes a bounded prefix of a large header.
func TestMissingColumnQuotesLittle(t *testing.T) {
	cols := []string{"sn", "cpu_milli", "memory_mib", "gpu"}
	for i := range 200 {
		cols = append(cols, fmt.Sprintf("extra_%03d_%s", i, strings.Repeat("c", 200)))
	}
	header := strings.Join(cols, ",")
	require.Greater(t, len(header), 40_000)
	_, err := ReadNodes(context.Background(), strings.NewReader(header+"\n"))
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "model", pe.Column)
	require.Contains(t, err.Error(), "missing column model")
	require.Contains(t, err.Error(), "204 columns")
	require.Less(t, len(err.Error()), 300)
}

func TestCSVLimits(t *testing.T) {
	t.Run("columns", func(t *testing.T) {
		header := "sn,cpu_milli,memory_mib,gpu,model" + strings.Repeat(",x", maxColumns)
		_, err := ReadNodes(context.Background(), strings.NewReader(header+"\n"))
		require.ErrorIs(t, err, ErrParse)
		require.ErrorIs(t, err, topology.ErrLimit)
		require.Contains(t, err.Error(), "simulate limit maxColumns")
	})
	t.Run("rows", func(t *testing.T) {
		defer func(v int) { rowLimit = v }(rowLimit)
		rowLimit = 3
		rows := func(n int) string {
			var b strings.Builder
			b.WriteString(nodeHeader)
			for i := range n {
				fmt.Fprintf(&b, "n%d,1,1,1,T4\n", i)
			}
			return b.String()
		}
		nodes, err := ReadNodes(context.Background(), strings.NewReader(rows(3)))
		require.NoError(t, err)
		require.Len(t, nodes, 3)
		_, err = ReadNodes(context.Background(), strings.NewReader(rows(4)))
		require.ErrorIs(t, err, ErrParse)
		require.ErrorIs(t, err, topology.ErrLimit)
		require.Contains(t, err.Error(), "simulate limit maxRows")
		var pe *ParseError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, 5, pe.Line)
	})
	t.Run("bytes", func(t *testing.T) {
		defer func(v int64) { csvByteLimit = v }(csvByteLimit)
		csvByteLimit = int64(len(nodeHeader)) + 10
		_, err := ReadNodes(context.Background(), strings.NewReader(nodeHeader+"a,1,1,1,T4\nb,1,1,1,T4\n"))
		require.ErrorIs(t, err, ErrParse)
		require.ErrorIs(t, err, topology.ErrLimit)
		require.Contains(t, err.Error(), "simulate limit maxCSVBytes")
		// Blank lines count too (the CSV reader skips them).
		_, err = ReadNodes(context.Background(), &genReader{prefix: nodeHeader, fill: '\n', n: 1 << 20})
		require.ErrorIs(t, err, topology.ErrLimit)
		require.Contains(t, err.Error(), "simulate limit maxCSVBytes")
	})
	t.Run("long value quoted briefly", func(t *testing.T) {
		_, err := ReadNodes(context.Background(), strings.NewReader(nodeHeader+"a,"+strings.Repeat("9x", 10000)+",1,1,T4\n"))
		require.ErrorIs(t, err, ErrParse)
		require.Contains(t, err.Error(), "(20000 bytes)")
		require.Less(t, len(err.Error()), 200)
	})
}

// failingReader returns data, then err.
type failingReader struct {
	data string
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestReadErrorsWrapErrRead: a failing reader's error wraps ErrRead and
// keeps the cause, and is not mistaken for malformed input.
func TestReadErrorsWrapErrRead(t *testing.T) {
	cause := errors.New("disk on fire")
	for name, data := range map[string]string{"at once": "", "after the header": nodeHeader, "mid-row": nodeHeader + "a,1,"} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadNodes(context.Background(), &failingReader{data: data, err: cause})
			require.ErrorIs(t, err, ErrRead)
			require.ErrorIs(t, err, cause)
			require.NotErrorIs(t, err, ErrParse)
			_, err = ReadPods(context.Background(), &failingReader{data: strings.Replace(data, nodeHeader, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", 1), err: cause})
			require.ErrorIs(t, err, ErrRead)
		})
	}
}
