package topology

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// smiTable is the raw content of an `nvidia-smi topo -m` printout: the
// device columns, one row per GPU or NIC printed, the affinity columns and
// the NIC legend. readSMITable reads it; smiTable.Node turns it into a
// validated [Node].
type smiTable struct {
	// Columns are the device column names in header order ("GPU0", ...,
	// "NIC0" or "mlx5_0").
	Columns []string
	// GPUs is the number of leading GPU columns (GPU0..GPU<GPUs-1>).
	GPUs int
	// Rows holds the device rows in input order.
	Rows []smiRow
	// NICLegend maps NIC column names to device names ("NIC0" → "mlx5_0").
	NICLegend map[string]string
	// HeaderSynthesized is true when the input had no header line and the
	// columns were inferred from the rows (see readSMITable).
	HeaderSynthesized bool
}

// smiRow is one device row of an `nvidia-smi topo -m` matrix.
type smiRow struct {
	// Name is the row label ("GPU3", "NIC1").
	Name string
	// Line is the 1-based input line number.
	Line int
	// Cells are the raw link cells ("X", "NV12", "PIX", ...), one per
	// column; fewer than the columns when the row was cut short.
	Cells []string
	// CPUAffinity, NUMAAffinity and GPUNUMAID are the affinity columns, ""
	// when absent.
	CPUAffinity, NUMAAffinity, GPUNUMAID string
}

// Truncated reports whether the row has fewer cells than columns.
func (r smiRow) Truncated(columns int) bool { return len(r.Cells) < columns }

// NvidiaSMIOptions tunes [ParseNvidiaSMI] and smiTable.Node.
type NvidiaSMIOptions struct {
	// Name is the node name.
	Name string
	// Model is the GPU model (nvidia-smi topo -m does not print it); it
	// decides per-link bandwidth and NVSwitch inference ("NVIDIA H200").
	Model string
	// GPUCount tells a header-less printout how many leading columns are
	// GPUs; 0 infers it from the rows.
	GPUCount int
	// Lenient builds with [Builder.SetLenient]: asymmetric cells keep the
	// weaker link and pairs printed nowhere become "no path", with warnings.
	Lenient bool
}

var (
	smiGPUName   = regexp.MustCompile(`^GPU(\d+)$`)
	smiNVCell    = regexp.MustCompile(`^NV(\d+)$`)
	smiLegendNIC = regexp.MustCompile(`^\s*(\S+)\s*:\s*(\S+)\s*$`)
	// Affinity column names, as printed (two or three words each).
	smiAffinityCols = [][]string{{"CPU", "Affinity"}, {"NUMA", "Affinity"}, {"GPU", "NUMA", "ID"}}
)

func isSMICell(tok string) bool {
	switch tok {
	case "X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC":
		return true
	}
	return smiNVCell.MatchString(tok)
}

// readSMITable reads `nvidia-smi topo -m` output, with tabs or spaces,
// with or without the trailing legends. It accepts NIC rows and columns,
// the CPU Affinity, NUMA Affinity and GPU NUMA ID columns, and rows cut
// short (the cells present are kept).
//
// Without a header line the columns are synthesized: the GPU count is the
// largest position of an "X" or "NV#" cell in any row plus one (override
// with opts.GPUCount in smiTable.Node's caller, [ParseNvidiaSMI]), and the
// remaining cells are named NIC0, NIC1, ...
//
// Errors wrap [ErrParse] and name the line. Input beyond maxSMIBytes,
// a line longer than maxSMILineBytes, more than maxSMIColumns device
// columns (or more than [MaxDevices] GPU columns), more than maxSMIRows
// rows or NIC legend entries fail with an error wrapping [ErrLimit], as
// soon as the limit is crossed.
func readSMITable(r io.Reader) (*smiTable, error) { return parseSMITable(r, 0) }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func parseSMITable(r io.Reader, gpuHint int) (*smiTable, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nvidia-smi table from a nil reader", ErrInvalidRequest)
	}
	if gpuHint > MaxDevices {
		return nil, fmt.Errorf("%w: NvidiaSMIOptions.GPUCount is %d, more than topology.MaxDevices (%d)", ErrLimit, gpuHint, MaxDevices)
	}
	if gpuHint < 0 {
		return nil, fmt.Errorf("%w: NvidiaSMIOptions.GPUCount is %d; want 0 (infer) or a GPU count", ErrParse, gpuHint)
	}
	cr := &countingReader{r: io.LimitReader(r, maxSMIBytes+1)}
	sc := bufio.NewScanner(cr)
	sc.Buffer(make([]byte, 0, 4<<10), maxSMILineBytes)
	t := &smiTable{NICLegend: map[string]string{}}
	var affinity []string // affinity column names, in order
	inLegend, inNICLegend := false, false
	lineNo := 0
	fail := func(format string, args ...any) (*smiTable, error) {
		return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: %s", ErrParse, lineNo, fmt.Sprintf(format, args...))
	}
	limit := func(format string, args ...any) (*smiTable, error) {
		return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: %s", ErrLimit, lineNo, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		lineNo++
		if cr.n > maxSMIBytes {
			return limit("input longer than topology limit maxSMIBytes (%d bytes)", maxSMIBytes)
		}
		line := strings.TrimRight(sc.Text(), "\r")
		toks := strings.Fields(line)
		if len(toks) == 0 {
			inLegend = false
			continue
		}
		switch {
		case strings.EqualFold(strings.TrimSpace(line), "NIC Legend:"):
			inNICLegend, inLegend = true, false
			continue
		case strings.EqualFold(strings.TrimSpace(line), "Legend:"):
			inLegend, inNICLegend = true, false
			continue
		case inNICLegend:
			if m := smiLegendNIC.FindStringSubmatch(line); m != nil {
				if _, dup := t.NICLegend[m[1]]; !dup && len(t.NICLegend) >= maxSMIRows {
					return limit("NIC legend longer than topology limit maxSMIRows (%d) entries", maxSMIRows)
				}
				t.NICLegend[m[1]] = m[2]
				continue
			}
			inNICLegend = false
		case inLegend:
			continue
		}
		if t.Columns == nil && isSMIHeader(toks) {
			cols, aff, err := splitSMIHeader(toks)
			if errors.Is(err, ErrLimit) {
				return nil, fmt.Errorf("nvidia-smi topo -m line %d: %w", lineNo, err)
			}
			if err != nil {
				return fail("%v", err)
			}
			t.Columns, affinity = cols, aff
			for _, c := range cols {
				if smiGPUName.MatchString(c) {
					t.GPUs++
				} else {
					break
				}
			}
			continue
		}
		if len(toks) < 2 || !isSMICell(toks[1]) {
			// Not a device row (a banner, a stray legend line): skip it.
			if len(t.Rows) == 0 || !looksLikeRowLabel(toks[0], t) {
				continue
			}
			if len(toks) == 1 {
				// A row label with nothing after it: a row cut right after its name.
				if len(t.Rows) >= maxSMIRows {
					return limit("more than topology limit maxSMIRows (%d) rows", maxSMIRows)
				}
				t.Rows = append(t.Rows, smiRow{Name: toks[0], Line: lineNo})
				continue
			}
			return fail("row %q: %q is not a link cell", toks[0], toks[1])
		}
		if len(t.Rows) >= maxSMIRows {
			return limit("more than topology limit maxSMIRows (%d) rows", maxSMIRows)
		}
		row := smiRow{Name: toks[0], Line: lineNo}
		rest := toks[1:]
		width := len(rest)
		if t.Columns != nil {
			width = min(width, len(t.Columns))
		}
		cells := 0
		for cells < width && isSMICell(rest[cells]) {
			cells++
		}
		if cells > maxSMIColumns {
			return limit("row %q has %d link cells, more than topology limit maxSMIColumns (%d)", row.Name, cells, maxSMIColumns)
		}
		row.Cells = rest[:cells:cells]
		extra := rest[len(row.Cells):]
		if t.Columns != nil && len(row.Cells) < len(t.Columns) && len(extra) > 0 {
			return fail("row %q: cell %d is %q, want a link (X, NV#, PIX, PXB, PHB, NODE, SYS)", row.Name, len(row.Cells)+1, extra[0])
		}
		if t.Columns == nil {
			// Header-less input: remember affinity values positionally.
			affinity = []string{"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"}
		}
		if len(extra) > len(affinity) {
			return fail("row %q: %d values after the link cells, but the header has %d affinity columns", row.Name, len(extra), len(affinity))
		}
		for i, v := range extra {
			switch affinity[i] {
			case "CPU Affinity":
				row.CPUAffinity = v
			case "NUMA Affinity":
				row.NUMAAffinity = v
			case "GPU NUMA ID":
				row.GPUNUMAID = v
			}
		}
		t.Rows = append(t.Rows, row)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			lineNo++
			return limit("line longer than topology limit maxSMILineBytes (%d bytes)", maxSMILineBytes)
		}
		return fail("%v", err)
	}
	if cr.n > maxSMIBytes {
		return limit("input longer than topology limit maxSMIBytes (%d bytes)", maxSMIBytes)
	}
	if len(t.Rows) == 0 {
		return nil, fmt.Errorf("%w: nvidia-smi topo -m: no device rows found", ErrParse)
	}
	if t.Columns == nil {
		if err := synthesizeSMIHeader(t, gpuHint); err != nil {
			return nil, err
		}
	}
	if t.GPUs == 0 {
		return nil, fmt.Errorf("%w: nvidia-smi topo -m: no GPU columns", ErrParse)
	}
	return t, nil
}

func looksLikeRowLabel(tok string, t *smiTable) bool {
	if smiGPUName.MatchString(tok) {
		return true
	}
	for _, c := range t.Columns {
		if c == tok {
			return true
		}
	}
	return false
}

// isSMIHeader: the line names GPU columns and holds no link cell.
func isSMIHeader(toks []string) bool {
	hasGPU := false
	for _, tok := range toks {
		if isSMICell(tok) {
			return false
		}
		if smiGPUName.MatchString(tok) {
			hasGPU = true
		}
	}
	return hasGPU
}

func splitSMIHeader(toks []string) (cols, affinity []string, err error) {
	for i := 0; i < len(toks); {
		matched := false
		for _, words := range smiAffinityCols {
			if i+len(words) <= len(toks) && equalFoldAll(toks[i:i+len(words)], words) {
				affinity = append(affinity, strings.Join(words, " "))
				i += len(words)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		if affinity != nil {
			return nil, nil, fmt.Errorf("header: device column %q after the affinity columns", toks[i])
		}
		cols = append(cols, toks[i])
		i++
	}
	if len(cols) > maxSMIColumns {
		return nil, nil, fmt.Errorf("%w: header has %d device columns, more than topology limit maxSMIColumns (%d)", ErrLimit, len(cols), maxSMIColumns)
	}
	gpus := 0
	for gpus < len(cols) && smiGPUName.MatchString(cols[gpus]) {
		gpus++
	}
	if gpus > MaxDevices {
		return nil, nil, fmt.Errorf("%w: header has %d GPU columns, more than topology.MaxDevices (%d)", ErrLimit, gpus, MaxDevices)
	}
	if len(cols)-gpus > maxNICs {
		return nil, nil, fmt.Errorf("%w: header has %d NIC columns, more than topology limit maxNICs (%d)", ErrLimit, len(cols)-gpus, maxNICs)
	}
	seen := map[string]bool{}
	for i, c := range cols {
		if seen[c] {
			return nil, nil, fmt.Errorf("header: column %q appears twice", c)
		}
		seen[c] = true
		if m := smiGPUName.FindStringSubmatch(c); m != nil && m[1] != strconv.Itoa(i) {
			return nil, nil, fmt.Errorf("header: column %d is %q, want GPU%d (GPU columns come first, in order)", i+1, c, i)
		}
	}
	return cols, affinity, nil
}

func equalFoldAll(a, b []string) bool {
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

func synthesizeSMIHeader(t *smiTable, gpuHint int) error {
	t.HeaderSynthesized = true
	// GPU rows decide the GPU count; a NIC row's "X" marks its own
	// column, after the GPUs. Only when no row is named GPU<n> do all
	// rows count.
	gpuRows := false
	for _, r := range t.Rows {
		if smiGPUName.MatchString(r.Name) {
			gpuRows = true
			break
		}
	}
	width, gpus := 0, gpuHint
	for _, r := range t.Rows {
		width = max(width, len(r.Cells))
		if gpuHint > 0 {
			continue
		}
		m := smiGPUName.FindStringSubmatch(r.Name)
		if m != nil {
			k, err := strconv.Atoi(m[1])
			if err != nil || k >= MaxDevices {
				return fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q: GPU index beyond topology.MaxDevices (%d)", ErrLimit, r.Line, r.Name, MaxDevices)
			}
			gpus = max(gpus, k+1)
		}
		if m == nil && gpuRows {
			continue
		}
		for i, c := range r.Cells {
			if c == "X" || smiNVCell.MatchString(c) {
				gpus = max(gpus, i+1)
			}
		}
	}
	width = max(width, gpus)
	if gpus > MaxDevices {
		return fmt.Errorf("%w: nvidia-smi topo -m without a header: rows imply %d GPU columns, more than topology.MaxDevices (%d)", ErrLimit, gpus, MaxDevices)
	}
	if width-gpus > maxNICs {
		return fmt.Errorf("%w: nvidia-smi topo -m without a header: rows imply %d NIC columns, more than topology limit maxNICs (%d)", ErrLimit, width-gpus, maxNICs)
	}
	// A NIC column takes the name of the row whose "X" sits in it (NIC0,
	// or mlx5_0 when the printout names NICs so), else NIC<k>.
	nicNames := make(map[int]string)
	used := make(map[string]bool)
	for _, r := range t.Rows {
		if smiGPUName.MatchString(r.Name) || used[r.Name] {
			continue
		}
		for i, c := range r.Cells {
			if c == "X" && i >= gpus && nicNames[i] == "" {
				nicNames[i] = r.Name
				used[r.Name] = true
				break
			}
		}
	}
	t.Columns = make([]string, 0, width)
	for i := 0; i < width; i++ {
		switch {
		case i < gpus:
			t.Columns = append(t.Columns, "GPU"+strconv.Itoa(i))
		case nicNames[i] != "":
			t.Columns = append(t.Columns, nicNames[i])
		default:
			name := "NIC" + strconv.Itoa(i-gpus)
			if used[name] {
				name = "NIC#" + strconv.Itoa(i-gpus) // a row took this name for another column
			}
			t.Columns = append(t.Columns, name)
		}
	}
	t.GPUs = gpus
	return nil
}

// smiLink converts one cell to a Link. ok is false for "X".
func smiLink(cell string) (l Link, self bool, err error) {
	switch cell {
	case "X":
		return Link{}, true, nil
	case "PIX":
		return Link{Kind: LinkPIX}, false, nil
	case "PXB":
		return Link{Kind: LinkPXB}, false, nil
	case "PHB":
		return Link{Kind: LinkPHB}, false, nil
	case "NODE":
		return Link{Kind: LinkNODE}, false, nil
	case "SYS", "SOC": // SOC is the pre-2017 name of SYS
		return Link{Kind: LinkSYS}, false, nil
	}
	if m := smiNVCell.FindStringSubmatch(cell); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 1024 {
			return Link{}, false, fmt.Errorf("NVLink count in %q out of range 1..1024", cell)
		}
		return Link{Kind: LinkNVLink, Lanes: n}, false, nil
	}
	return Link{}, false, fmt.Errorf("unknown link cell %q", cell)
}

// firstNUMA reads a NUMA Affinity value: "3", "0,3-9,11-17" (Grace prints a
// list; the first node is the one the GPU hangs off) or "N/A" (-1).
func firstNUMA(v string) (int, error) {
	if v == "" || strings.EqualFold(v, "N/A") {
		return -1, nil
	}
	head, _, _ := strings.Cut(v, ",")
	head, _, _ = strings.Cut(head, "-")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || n >= maxNUMANodes {
		return 0, fmt.Errorf("NUMA affinity %q", v)
	}
	return n, nil
}

// Node converts the table into a validated node: one device per GPU
// column, links from the GPU rows (a pair printed in one row only is
// mirrored), NICs from the other columns with GPU-to-NIC path classes, and
// NVSwitch inferred from NVLink lane counts (see [Builder.SetInferNVSwitch]).
//
// A table beyond the limits readSMITable enforces (more than
// [MaxDevices] GPU columns, maxNICs NIC columns or maxSMIRows rows)
// fails with an error wrapping [ErrLimit] before any work. Every other
// error wraps [ErrParse]; a table that does not give a valid node also
// wraps [ErrInvalidTopology] and the [Builder]'s specific sentinels.
func (t *smiTable) Node(opts NvidiaSMIOptions) (*Node, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: Node of a nil *smiTable", ErrInvalidRequest)
	}
	switch {
	case t.GPUs > MaxDevices:
		return nil, fmt.Errorf("%w: nvidia-smi table of %d GPUs, more than topology.MaxDevices (%d)", ErrLimit, t.GPUs, MaxDevices)
	case t.GPUs < 0 || t.GPUs > len(t.Columns):
		return nil, fmt.Errorf("%w: nvidia-smi table: %d GPUs but %d columns", ErrParse, t.GPUs, len(t.Columns))
	case len(t.Columns)-t.GPUs > maxNICs:
		return nil, fmt.Errorf("%w: nvidia-smi table of %d NIC columns, more than topology limit maxNICs (%d)", ErrLimit, len(t.Columns)-t.GPUs, maxNICs)
	case len(t.Rows) > maxSMIRows:
		return nil, fmt.Errorf("%w: nvidia-smi table of %d rows, more than topology limit maxSMIRows (%d)", ErrLimit, len(t.Rows), maxSMIRows)
	}
	rowOf := map[string]*smiRow{}
	for i := range t.Rows {
		r := &t.Rows[i]
		if _, dup := rowOf[r.Name]; dup {
			return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q printed twice", ErrParse, r.Line, r.Name)
		}
		rowOf[r.Name] = r
	}
	colIndex := map[string]int{}
	for i, c := range t.Columns {
		colIndex[c] = i
	}
	for _, r := range t.Rows {
		if _, ok := colIndex[r.Name]; !ok {
			return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q has no column", ErrParse, r.Line, r.Name)
		}
	}
	cell := func(row, col int) (string, int, bool) {
		r := rowOf[t.Columns[row]]
		if r == nil || col >= len(r.Cells) {
			return "", 0, false
		}
		return r.Cells[col], r.Line, true
	}
	b := NewBuilder().SetName(opts.Name).SetLenient(opts.Lenient).SetInferNVSwitch(true)
	for g := 0; g < t.GPUs; g++ {
		d := Device{Index: g, Vendor: VendorNVIDIA, Model: opts.Model, NUMA: -1}
		if r := rowOf[t.Columns[g]]; r != nil {
			cpus, err := ParseCPUSet(r.CPUAffinity)
			if err != nil {
				return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q: %w", ErrParse, r.Line, r.Name, err)
			}
			d.CPUs = cpus
			if d.NUMA, err = firstNUMA(r.NUMAAffinity); err != nil {
				return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q: %v", ErrParse, r.Line, r.Name, err)
			}
		}
		b.AddDevice(d)
	}
	for i := 0; i < t.GPUs; i++ {
		for j := 0; j < t.GPUs; j++ {
			c, line, ok := cell(i, j)
			if !ok {
				continue
			}
			l, self, err := smiLink(c)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q column %q: %v", ErrParse, line, t.Columns[i], t.Columns[j], err)
			case self != (i == j):
				return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: row %q column %q: %q (X marks the diagonal only)", ErrParse, line, t.Columns[i], t.Columns[j], c)
			case self:
				continue
			}
			if _, _, mirrored := cell(j, i); mirrored {
				b.SetLink(i, j, l)
			} else {
				b.SetLinkPair(i, j, l)
			}
		}
	}
	for k := t.GPUs; k < len(t.Columns); k++ {
		name := t.Columns[k]
		b.AddNIC(NIC{Name: name, Device: t.NICLegend[name], NUMA: -1})
		for g := 0; g < t.GPUs; g++ {
			c, line, ok := cell(g, k)
			if !ok {
				c, line, ok = cell(k, g)
			}
			if !ok {
				continue
			}
			l, self, err := smiLink(c)
			if err != nil || self || !l.Kind.IsPCIe() {
				return nil, fmt.Errorf("%w: nvidia-smi topo -m line %d: GPU%d and %q: %q is not a PCIe path class", ErrParse, line, g, name, c)
			}
			b.SetNICLink(g, k-t.GPUs, l.Kind)
		}
	}
	n, err := buildParsed(b)
	if err == nil && opts.Model != "" && !knownModel(opts.Model) {
		n.warnings = append(n.warnings, fmt.Sprintf("GPU model %q is not in the link-rate table: bandwidths use the defaults (NVLink %g GB/s per link, PCIe Gen4) and NVSwitch inference allows %d NVLinks per GPU",
			opts.Model, defaultRates.nvlink, defaultRates.maxNVLink))
	}
	return n, err
}

// knownModel reports whether the link-rate table has the model.
func knownModel(model string) bool {
	m := strings.ToUpper(model)
	for _, r := range rateTable {
		if strings.Contains(m, r.match) {
			return true
		}
	}
	return false
}

// ParseNvidiaSMI reads `nvidia-smi topo -m` output and returns the
// validated [Node] it describes. It accepts tabs or spaces, with or
// without the trailing legends, NIC rows and columns, the CPU Affinity,
// NUMA Affinity and GPU NUMA ID columns, and rows cut short (the cells
// present are kept). Without a header line the columns are synthesized:
// the GPU count is opts.GPUCount, or else the largest position of an "X"
// or "NV#" cell in any row plus one, and the remaining cells are NICs.
//
// Errors wrap [ErrParse] and name the line and cell. Input beyond
// maxSMIBytes and tables beyond the limits in the package documentation
// fail with an error wrapping [ErrLimit], as soon as the limit is crossed.
func ParseNvidiaSMI(r io.Reader, opts NvidiaSMIOptions) (*Node, error) {
	t, err := parseSMITable(r, opts.GPUCount)
	if err != nil {
		return nil, err
	}
	return t.Node(opts)
}
