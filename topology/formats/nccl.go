package formats

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// NCCL topology file constants (NVIDIA/nccl src/graph/xml.cc, topo.cc).
const (
	// NCCLTopoXMLVersion is the <system version> NCCL requires
	// (NCCL_TOPO_XML_VERSION).
	NCCLTopoXMLVersion = 1
	// NCCLClassGPU is the PCI class written for a GPU (3D controller).
	NCCLClassGPU = "0x030200"
	// NCCLClassNIC is the PCI class written for a NIC (Ethernet
	// controller; NCCL treats every 0x02 class as a NIC).
	NCCLClassNIC = "0x020000"
	// NCCLClassNVSwitch is the <nvlink tclass> of a link into an NVSwitch
	// fabric (PCI bridge class); NCCL folds all such targets into one
	// NVSwitch node.
	NCCLClassNVSwitch = "0x068000"
	// NCCLNVSwitchTarget is the <nvlink target> NCCL itself writes when the
	// NVSwitch is not a visible PCI device (VMs, GB200 trays): NVML's
	// placeholder bus id.
	NCCLNVSwitchTarget = "fffffff:ff:ff.0"
)

// smVersions maps model-name fragments to CUDA compute capability ×10, the
// <gpu sm> attribute. Longer, more specific fragments come first.
var smVersions = []struct {
	frag string
	sm   int
}{
	{"GB300", 103}, {"B300", 103}, {"GB200", 100}, {"B200", 100}, {"B100", 100},
	{"GH200", 90}, {"H100", 90}, {"H200", 90}, {"H800", 90}, {"H20", 90},
	{"A100", 80}, {"A800", 80}, {"A30", 80},
	{"L40", 89}, {"RTX 40", 89}, {"4090", 89}, {"L4", 89}, {"ADA", 89},
	{"A6000", 86}, {"A5000", 86}, {"A40", 86}, {"RTX 30", 86}, {"3090", 86}, {"A10", 86},
	{"V100", 70}, {"P100", 60},
}

// NCCLSM returns the <gpu sm> value (compute capability × 10, e.g. 90 for
// an H100) for a device model name, and false when the model is unknown.
func NCCLSM(model string) (int, bool) {
	m := strings.ToUpper(model)
	for _, s := range smVersions {
		if strings.Contains(m, s.frag) {
			return s.sm, true
		}
	}
	return 0, false
}

// xmlElem is one element of the document, written with attributes in the
// order given (NCCL reads attributes by name; the order keeps goldens stable).
type xmlElem struct {
	name  string
	attrs [][2]string
	subs  []*xmlElem
}

func (e *xmlElem) attr(k, v string) *xmlElem { e.attrs = append(e.attrs, [2]string{k, v}); return e }
func (e *xmlElem) add(c *xmlElem) *xmlElem   { e.subs = append(e.subs, c); return c }

func (e *xmlElem) write(w *bytes.Buffer, indent int) {
	w.WriteString(strings.Repeat(" ", indent))
	w.WriteString("<" + e.name)
	for _, a := range e.attrs {
		w.WriteString(" " + a[0] + `="`)
		_ = xml.EscapeText(w, []byte(a[1])) // bytes.Buffer writes never fail
		w.WriteString(`"`)
	}
	if len(e.subs) == 0 {
		w.WriteString("/>\n")
		return
	}
	w.WriteString(">\n")
	for _, s := range e.subs {
		s.write(w, indent+2)
	}
	w.WriteString(strings.Repeat(" ", indent) + "</" + e.name + ">\n")
}

// ncclBusID formats a PCI address the way NCCL writes bus ids
// ("0000:18:00.0", lower case).
func ncclBusID(a topology.PCIAddress) string { return strings.ToLower(a.String()) }

// cpuMask formats a CPU set as a Linux cpumask ("ffffffff,000000ff"): 32-bit
// hex words, most significant first, as NCCL reads <cpu affinity> from
// sysfs local_cpus.
func cpuMask(cpus []int) string {
	if len(cpus) == 0 {
		return ""
	}
	top := slices.Max(cpus)
	words := make([]uint32, top/32+1)
	for _, c := range cpus {
		words[c/32] |= 1 << (c % 32)
	}
	parts := make([]string, len(words))
	for i := range words {
		parts[len(words)-1-i] = fmt.Sprintf("%08x", words[i])
	}
	return strings.Join(parts, ",")
}

// NCCLTopologyXML returns node n as an NCCL topology file (the document
// NCCL_TOPO_FILE points to), NCCL's own layout:
//
//	<system version="1">
//	  <cpu numaid="0" affinity="...">
//	    <pci busid="0000:18:00.0" class="0x030200">
//	      <gpu dev="0" sm="90">
//	        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
//	      </gpu>
//	    </pci>
//	    <pci busid="..." class="0x020000"><nic><net name="mlx5_0" dev="0" speed="400000"/></nic></pci>
//	  </cpu>
//	</system>
//
// It writes only what the model knows: one <cpu> per NUMA node (ascending)
// with the union of its devices' CPU affinity as a cpumask; each GPU's bus
// id, its sm (from the model name, see [NCCLSM]) and device index; one
// <nvlink> per NVLink peer (target = the peer's bus id, tclass 0x030200,
// count = bonded links) or, for an NVSwitch fabric, one <nvlink> to
// [NCCLNVSwitchTarget] with tclass 0x068000 and the GPU's link count into
// the fabric; NICs whose PCI address and NUMA node are known, with their
// RDMA device name and speed. It leaves out what it does not know (CPU
// arch/vendor, PCIe switches, link speeds, rank, gdr), which NCCL then
// detects or defaults. PCIe switch levels (PIX/PXB) are not expressed:
// NCCL sees every GPU directly under its CPU.
//
// Devices must be NVIDIA GPUs with a PCI address, a NUMA node and a known
// model; anything else (an AMD node, whose RCCL format adds xGMI elements
// this package does not write) fails with an error wrapping
// [errors.ErrUnsupported] that names the device.
func NCCLTopologyXML(n *topology.Node) ([]byte, error) {
	if n == nil {
		return nil, fmt.Errorf("formats: NCCL XML of a nil node: %w", topology.ErrInvalidRequest)
	}
	if n.Len() == 0 {
		return nil, fmt.Errorf("formats: NCCL XML: node %q has no devices: %w", n.Name(), errors.ErrUnsupported)
	}
	devs := n.Devices()
	sms := make([]int, len(devs))
	for i, d := range devs {
		var err error
		switch {
		case d.Vendor != topology.VendorNVIDIA:
			err = fmt.Errorf("vendor %s; NCCL topology files describe NVIDIA GPUs only", d.Vendor)
		case !d.PCI.IsValid():
			err = errors.New("PCI address unknown; NCCL matches GPUs by bus id")
		case d.NUMA < 0:
			err = errors.New("NUMA node unknown")
		case d.Partition.Kind == topology.PartitionAMD || d.Package != "":
			err = errors.New("a logical partition; NCCL topology files describe physical GPUs")
		}
		if err == nil {
			sm, ok := NCCLSM(d.Model)
			if !ok {
				err = fmt.Errorf("model %q has no known SM version", d.Model)
			}
			sms[i] = sm
		}
		if err != nil {
			return nil, fmt.Errorf("formats: NCCL XML: node %q device %d: %v: %w", n.Name(), i, err, errors.ErrUnsupported)
		}
	}
	sys := &xmlElem{name: "system"}
	sys.attr("version", strconv.Itoa(NCCLTopoXMLVersion))
	cpus := map[int]*xmlElem{}
	numas := n.NUMANodes()
	nics := n.NICs()
	for _, nic := range nics {
		if nic.PCI.IsValid() && nic.NUMA >= 0 && !slices.Contains(numas, nic.NUMA) {
			numas = append(numas, nic.NUMA)
		}
	}
	slices.Sort(numas)
	for _, id := range numas {
		var set []int
		for _, d := range devs {
			if d.NUMA == id {
				for _, c := range d.CPUs.CPUs() {
					if !slices.Contains(set, c) {
						set = append(set, c)
					}
				}
			}
		}
		cpu := sys.add(&xmlElem{name: "cpu"}).attr("numaid", strconv.Itoa(id))
		if m := cpuMask(set); m != "" {
			cpu.attr("affinity", m)
		}
		cpus[id] = cpu
	}
	for i, d := range devs {
		pci := cpus[d.NUMA].add(&xmlElem{name: "pci"}).attr("busid", ncclBusID(d.PCI)).attr("class", NCCLClassGPU)
		gpu := pci.add(&xmlElem{name: "gpu"}).attr("dev", strconv.Itoa(d.Index)).attr("sm", strconv.Itoa(sms[i]))
		switchLanes := 0
		for j := range devs {
			if i == j {
				continue
			}
			switch l := n.Link(i, j); l.Kind {
			case topology.LinkNVLink:
				if l.Lanes > 0 {
					gpu.add(&xmlElem{name: "nvlink"}).attr("target", ncclBusID(devs[j].PCI)).
						attr("count", strconv.Itoa(l.Lanes)).attr("tclass", NCCLClassGPU)
				}
			case topology.LinkNVSwitch:
				switchLanes = max(switchLanes, l.Lanes)
			}
		}
		if switchLanes > 0 {
			gpu.add(&xmlElem{name: "nvlink"}).attr("target", NCCLNVSwitchTarget).
				attr("count", strconv.Itoa(switchLanes)).attr("tclass", NCCLClassNVSwitch)
		}
	}
	for k, nic := range nics {
		if !nic.PCI.IsValid() || nic.NUMA < 0 {
			continue
		}
		name := nic.Device
		if name == "" {
			name = nic.Name
		}
		pci := cpus[nic.NUMA].add(&xmlElem{name: "pci"}).attr("busid", ncclBusID(nic.PCI)).attr("class", NCCLClassNIC)
		net := pci.add(&xmlElem{name: "nic"}).add(&xmlElem{name: "net"}).attr("name", name).attr("dev", strconv.Itoa(k))
		if nic.SpeedMbps > 0 {
			net.attr("speed", strconv.FormatUint(nic.SpeedMbps, 10))
		}
	}
	var b bytes.Buffer
	sys.write(&b, 0)
	return b.Bytes(), nil
}

// WriteNCCLTopology writes [NCCLTopologyXML] of n to w.
func WriteNCCLTopology(w io.Writer, n *topology.Node) error {
	b, err := NCCLTopologyXML(n)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
