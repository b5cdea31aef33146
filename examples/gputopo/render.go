package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/gputopo/gputopo/topology"
)

// renderNode prints a node for a person: devices, the link matrix in
// nvidia-smi's vocabulary, the bandwidth matrix, fabric islands and NICs.
func renderNode(w io.Writer, n *topology.Node) error {
	fmt.Fprintf(w, "Node %s\n", n.String())
	if f := n.Fabric(); !f.IsZero() {
		fmt.Fprintf(w, "Multi-node NVLink domain (clique): %s\n", f)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEV\tMODEL\tMEMORY\tNUMA\tCPUS\tPCI\tHEALTH\tPARTITION")
	for _, d := range n.Devices() {
		fmt.Fprintf(tw, "GPU%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Index, orDash(d.Model), memory(d.MemoryBytes),
			numa(d.NUMA), orDash(d.CPUs.String()), orDash(d.PCI.String()), health(d), partition(d))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	size := n.Len()
	if size > 24 {
		fmt.Fprintf(w, "\n%d devices: link matrix omitted; per-island summary:\n", size)
	} else {
		fmt.Fprintln(w, "\nLinks:")
		tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		header := "\t"
		for j := 0; j < size; j++ {
			header += "GPU" + strconv.Itoa(j) + "\t"
		}
		fmt.Fprintln(tw, header)
		for i := 0; i < size; i++ {
			row := "GPU" + strconv.Itoa(i) + "\t"
			for j := 0; j < size; j++ {
				row += cell(n, i, j) + "\t"
			}
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, "\nEstimated bandwidth, GB/s per direction (NVSwitch: each GPU's share of the fabric):")
		tw = tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, header)
		for i := 0; i < size; i++ {
			row := "GPU" + strconv.Itoa(i) + "\t"
			for j := 0; j < size; j++ {
				if i == j {
					row += "-\t"
				} else {
					row += strconv.FormatFloat(n.Bandwidth(i, j), 'f', -1, 64) + "\t"
				}
			}
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, "\nLegend: NVS<n> = NVSwitch fabric, n links per GPU; NV<n> = n bonded NVLinks; XGMI<n> = n xGMI links;")
		fmt.Fprintln(w, "        PIX/PXB = PCIe switch(es); PHB = host bridge; NODE = same NUMA node; SYS = across sockets; - = no path")
	}
	fmt.Fprintln(w, "\nFabric islands (devices joined by NVLink, NVSwitch or xGMI):")
	for k, is := range n.Islands() {
		fmt.Fprintf(w, "  island %d: %s\n", k, deviceList(is))
	}
	if nics := n.NICs(); len(nics) > 0 {
		fmt.Fprintln(w, "\nNearest NICs:")
		for i := 0; i < size; i++ {
			var names []string
			for _, k := range n.NearestNICs(i) {
				names = append(names, nicName(nics[k])+" ("+n.NICLink(i, k).String()+")")
			}
			if names != nil {
				fmt.Fprintf(w, "  GPU%d: %s\n", i, strings.Join(names, ", "))
			}
		}
	}
	if warn := n.Warnings(); len(warn) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, s := range warn {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	return nil
}

func cell(n *topology.Node, i, j int) string {
	if i == j {
		return "X"
	}
	l := n.Link(i, j)
	switch l.Kind {
	case topology.LinkNVSwitch:
		return "NVS" + strconv.Itoa(l.Lanes)
	case topology.LinkNVLink:
		return "NV" + strconv.Itoa(l.Lanes)
	case topology.LinkXGMI:
		return "XGMI" + strconv.Itoa(l.Lanes)
	case topology.LinkNone:
		return "-"
	}
	return l.Kind.String()
}

func deviceList(devs []int) string {
	parts := make([]string, len(devs))
	for i, d := range devs {
		parts[i] = strconv.Itoa(d)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func numa(v int) string {
	if v < 0 {
		return "-"
	}
	return strconv.Itoa(v)
}

func memory(b uint64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', -1, 64) + " GiB"
}

func health(d topology.Device) string {
	if d.Health == topology.Unhealthy && d.HealthReason != "" {
		return "unhealthy: " + d.HealthReason
	}
	return d.Health.String()
}

func partition(d topology.Device) string {
	p := d.Partition
	switch p.Kind {
	case topology.PartitionMIG:
		if p.Enabled {
			return "MIG (on)"
		}
		return "MIG (off)"
	case topology.PartitionAMD:
		s := strings.TrimSpace(p.ComputeMode + " " + p.MemoryMode)
		if d.Package != "" && p.Enabled {
			s += fmt.Sprintf(" #%d of %s", p.Index, d.Package)
		}
		return s
	}
	return "-"
}

// nicName names a NIC by its RDMA device (mlx5_0), as our JSON and the DOT
// output do, else by nvidia-smi's column name (NIC0).
func nicName(nic topology.NIC) string {
	if nic.Device != "" {
		return nic.Device
	}
	return nic.Name
}

// termSafe is a writer for a terminal: it passes text through but writes
// the characters that could drive the terminal as visible escapes, so a
// name from an input file (a job, node, pod or GPU name) cannot recolour
// the terminal, set its title, move the cursor or reorder what is shown.
// Escaped: C0 controls but newline and tab (so also ESC, BEL and carriage
// return, as \x1b), DEL, C1 controls (\u009b) and the Unicode bidi
// overrides and isolates (\u202e). JSON output has these escaped already;
// every command's output goes through termSafe anyway.
type termSafe struct {
	w       io.Writer
	pending []byte // a rune split between writes
	buf     []byte
}

func newTermSafe(w io.Writer) *termSafe { return &termSafe{w: w} }

// Write writes p with unsafe characters escaped.
func (t *termSafe) Write(p []byte) (int, error) {
	in := p
	if len(t.pending) > 0 {
		in = append(t.pending, p...)
		t.pending = nil
	}
	out := t.buf[:0]
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				out = fmt.Appendf(out, `\x%02x`, c)
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(in[i:]) {
			t.pending = append(t.pending[:0], in[i:]...)
			break
		}
		r, size := utf8.DecodeRune(in[i:])
		if unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, in[i:i+size]...)
		}
		i += size
	}
	t.buf = out
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a rune left incomplete at the end.
func (t *termSafe) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	_, err := t.w.Write(t.pending)
	t.pending = nil
	return err
}

func unsafeRune(r rune) bool {
	return (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
