// Command quickstart reads what `nvidia-smi topo -m` printed and picks the
// best 4 free GPUs of the node.
package main

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

func main() {
	// nvidia-smi topo -m > node.txt
	if err := run(os.Stdout, "node.txt"); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err // open node.txt: no such file or directory
	}
	defer f.Close()
	node, err := topology.ParseNvidiaSMI(f, topology.NvidiaSMIOptions{Model: "NVIDIA H100 80GB HBM3"})
	if err != nil {
		return err // names the line and cell at fault; errors.Is(err, topology.ErrParse)
	}
	l := node.Link(0, 3)
	fmt.Fprintln(w, l.Kind, l.Lanes, l.Bandwidth) // NVSwitch 18 450

	// What is in use is separate from what the hardware is.
	state := scoring.NewStateFor(node)
	if err := state.Allocate(0, 5); err != nil {
		return err
	}
	res, err := scoring.SelectDevices(node, state, scoring.Request{Count: 4}, scoring.WithExplanation())
	if err != nil {
		return err // errors.Is(err, scoring.ErrUnsatisfiable) when 4 GPUs are not free
	}
	fmt.Fprintln(w, res.Devices(), res.Exact) // [1 2 3 4] true: the proven best 4 of the 6 free GPUs
	for _, c := range res.Components {
		fmt.Fprintf(w, "%s %.3f\n", c.Name, c.Value) // ring, aggregate, numa, pcie, ...
	}
	return nil
}
