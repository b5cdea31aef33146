package kube_test

import (
	"errors"
	"testing"

	"github.com/gputopo/gputopo/provider/catalog"
	"github.com/gputopo/gputopo/topology/kube"
)

// FuzzDecodeAnnotation: any value either decodes to a node that re-encodes
// and decodes to an equal node, or fails with one of the package's
// sentinels; it never panics.
func FuzzDecodeAnnotation(f *testing.F) {
	for _, name := range []string{"dgx-h100", "mi250x-8gcd", "gb200-nvl72-tray"} {
		n, err := catalog.Get(name)
		if err != nil {
			f.Fatal(err)
		}
		v, err := kube.EncodeAnnotation(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
		doc, _ := n.MarshalJSON()
		f.Add(string(doc))
	}
	f.Add("")
	f.Add("v1z:")
	f.Add("v1z:H4sIAAAAAAAC/w")
	f.Fuzz(func(t *testing.T, value string) {
		n, err := kube.DecodeAnnotation(value)
		if err != nil {
			if !errors.Is(err, kube.ErrBadAnnotation) && !errors.Is(err, kube.ErrTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		v, err := kube.EncodeAnnotation(n)
		if err != nil {
			if errors.Is(err, kube.ErrTooLarge) {
				return
			}
			t.Fatalf("re-encode: %v", err)
		}
		back, err := kube.DecodeAnnotation(v)
		if err != nil || !back.Equal(n) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzParseLabels: any label map parses or fails with ErrBadLabel, and the
// labels of the summary's own node parse back.
func FuzzParseLabels(f *testing.F) {
	f.Add("8", "NVIDIA-H100", "81920", "true", "uuid.1", "nvswitch", "nvidia", "8")
	f.Add("x", "", "-1", "maybe", "nodot", "pigeon", "acme", "99")
	f.Fuzz(func(t *testing.T, count, product, memory, mig, clique, link, vendor, healthy string) {
		l := map[string]string{
			kube.LabelDeviceCount: count, kube.LabelGPUProduct: product, kube.LabelGPUMemory: memory,
			kube.LabelMIGCapable: mig, kube.LabelClique: clique, kube.LabelInterconnect: link,
			kube.LabelVendor: vendor, kube.LabelHealthy: healthy,
		}
		s, err := kube.ParseLabels(l)
		if err != nil {
			if !errors.Is(err, kube.ErrBadLabel) {
				t.Fatalf("error %v does not wrap ErrBadLabel", err)
			}
			return
		}
		if s.Healthy > s.Count || s.Count < 0 {
			t.Fatalf("inconsistent summary %+v", s)
		}
	})
}
