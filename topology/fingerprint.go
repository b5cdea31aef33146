package topology

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"math"
)

// fpWriter streams fixed-width, length-prefixed fields into a hash through
// a small buffer, so fingerprinting a node allocates a constant amount
// however many devices and links it has.
type fpWriter struct {
	h   hash.Hash
	buf []byte
}

const fpBufSize = 1 << 10

func newFPWriter(domain string) *fpWriter {
	w := &fpWriter{h: sha256.New(), buf: make([]byte, 0, fpBufSize)}
	w.str(domain)
	return w
}

func (w *fpWriter) room(n int) {
	if len(w.buf)+n > cap(w.buf) {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *fpWriter) u8(v uint8) { w.room(1); w.buf = append(w.buf, v) }

func (w *fpWriter) u64(v uint64) { w.room(8); w.buf = binary.LittleEndian.AppendUint64(w.buf, v) }

func (w *fpWriter) int(v int) { w.u64(uint64(int64(v))) }

func (w *fpWriter) bool(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *fpWriter) str(s string) {
	w.int(len(s))
	for len(s) > 0 {
		if len(w.buf) == cap(w.buf) {
			w.room(1)
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], s)
		w.buf = w.buf[:len(w.buf)+k]
		s = s[k:]
	}
}

func (w *fpWriter) link(l Link) {
	w.room(18)
	w.buf = append(w.buf, uint8(l.Kind), uint8(l.PCIe))
	w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(int64(l.Lanes)))
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(l.Bandwidth))
}

func (w *fpWriter) cpus(s CPUSet) {
	w.int(len(s.words))
	for _, x := range s.words {
		w.u64(x)
	}
}

func (w *fpWriter) partition(p Partitioning) {
	w.u8(uint8(p.Kind))
	w.bool(p.Enabled)
	w.str(p.ComputeMode)
	w.str(p.MemoryMode)
	w.int(len(p.AvailableModes))
	for _, m := range p.AvailableModes {
		w.str(m)
	}
	w.int(p.Index)
}

func (w *fpWriter) pci(a PCIAddress) {
	w.bool(a.valid)
	w.u64(uint64(a.domain)<<24 | uint64(a.bus)<<16 | uint64(a.device)<<8 | uint64(a.function))
}

func (w *fpWriter) sum() (f Fingerprint) {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
	w.h.Sum(f[:0])
	return f
}

// computeFingerprints fills n.shape and n.fp. The shape hash covers what
// ShapeFingerprint documents; the full fingerprint hashes the shape hash
// followed by every identifying and state field, so together they cover the
// whole node except its name.
func (n *Node) computeFingerprints() {
	w := newFPWriter("gputopo/shape/v1")
	size := len(n.devices)
	w.int(size)
	for i, d := range n.devices {
		w.u8(uint8(d.Vendor))
		w.str(d.Model)
		w.u64(d.MemoryBytes)
		w.int(d.NUMA)
		w.cpus(d.CPUs)
		w.partition(d.Partition)
		// Package membership, not the package's name: the index of the
		// first device in the same package (-1 for none).
		first := -1
		if d.Package != "" {
			for j := 0; j <= i; j++ {
				if n.devices[j].Package == d.Package {
					first = j
					break
				}
			}
		}
		w.int(first)
	}
	for i := 0; i < size; i++ {
		for j := i + 1; j < size; j++ {
			w.link(n.links[i*size+j])
		}
	}
	w.int(len(n.nics))
	for _, nic := range n.nics {
		w.int(nic.NUMA)
		w.u64(nic.SpeedMbps)
	}
	for _, k := range n.nicLinks {
		w.u8(uint8(k))
	}
	w.bool(n.numa != nil)
	w.int(len(n.numa))
	for _, row := range n.numa {
		for _, d := range row {
			w.int(d)
		}
	}
	w.bool(!n.fabric.IsZero())
	n.shape = w.sum()

	w.h.Reset()
	w.str("gputopo/node/v1")
	w.buf = append(w.buf, n.shape[:]...)
	for _, d := range n.devices {
		w.str(d.ID)
		w.pci(d.PCI)
		w.u8(uint8(d.Health))
		w.str(d.HealthReason)
		w.str(d.Package)
	}
	for _, nic := range n.nics {
		w.str(nic.Name)
		w.str(nic.Device)
		w.pci(nic.PCI)
	}
	w.str(n.fabric.ClusterUUID)
	w.u64(uint64(n.fabric.CliqueID))
	n.fp = w.sum()
}
