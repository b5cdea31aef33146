package kube

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gputopo/gputopo/topology"
)

// AnnotationTopology is the node annotation holding the full topology.
const AnnotationTopology = Prefix + "topology"

// EncodingV1 is the prefix of the annotation value [EncodeAnnotation]
// writes: "v1z:" followed by the base64 (standard alphabet, no padding)
// of the gzip-compressed, compacted JSON form of [topology.Node.MarshalJSON].
// The prefix versions the wrapping; the JSON inside carries its own schema
// tag ("gputopo/v1").
const EncodingV1 = "v1z:"

// MaxAnnotationBytes is Kubernetes' limit on the total size (keys plus
// values) of all annotations of one object, 256 KiB.
const MaxAnnotationBytes = 256 << 10

// AnnotationBudget is the most EncodeAnnotation will write (key plus
// value): half of [MaxAnnotationBytes], leaving the other half to the
// annotations other agents put on the node. Real machines need a few
// kilobytes (see the package tests for measured sizes).
const AnnotationBudget = MaxAnnotationBytes / 2

// maxDecodedAnnotationBytes bounds the decompressed JSON document of an
// annotation, against gzip bombs: [DecodeAnnotation] stops decompressing
// past it, and [EncodeAnnotation] refuses a node whose document is larger,
// so everything it writes decodes. The largest node that fits
// [AnnotationBudget] (about 256 fully linked GPUs) takes 2.5 MB; real
// machines take a few kilobytes. Decoding the largest accepted document
// allocates about 8 times its size in all (measured in the package tests).
const maxDecodedAnnotationBytes = 4 << 20

// EncodeAnnotation returns the value of [AnnotationTopology] for n. The
// encoding is deterministic: equal nodes give equal strings, so an agent
// can compare before patching. It fails with [ErrTooLarge] (and
// [topology.ErrLimit]) when key plus value would exceed [AnnotationBudget]
// or the document 4 MiB (maxDecodedAnnotationBytes, in the package's
// Limits table), so everything it writes decodes.
func EncodeAnnotation(n *topology.Node) (string, error) {
	if n == nil {
		return "", fmt.Errorf("%w: nil node", topology.ErrInvalidTopology)
	}
	doc, err := n.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("kube: encoding topology: %w", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return "", fmt.Errorf("%w: kube: compacting topology JSON: %v", topology.ErrInternal, err)
	}
	if compact.Len() > maxDecodedAnnotationBytes {
		return "", fmt.Errorf("%w: %d-byte document for %d devices, more than kube limit maxDecodedAnnotationBytes (%d)", ErrTooLarge, compact.Len(), n.Len(), maxDecodedAnnotationBytes)
	}
	var zipped bytes.Buffer
	// gzip into memory fails only on a bad level.
	zw, err := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	if err != nil {
		return "", fmt.Errorf("%w: kube: gzip: %v", topology.ErrInternal, err)
	}
	if _, err := zw.Write(compact.Bytes()); err != nil {
		return "", fmt.Errorf("%w: kube: gzip: %v", topology.ErrInternal, err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("%w: kube: gzip: %v", topology.ErrInternal, err)
	}
	out := EncodingV1 + base64.RawStdEncoding.EncodeToString(zipped.Bytes())
	if size := len(AnnotationTopology) + len(out); size > AnnotationBudget {
		return "", fmt.Errorf("%w: %d bytes for %d devices, more than kube.AnnotationBudget (%d)", ErrTooLarge, size, n.Len(), AnnotationBudget)
	}
	return out, nil
}

// DecodeAnnotation decodes a value written by [EncodeAnnotation]. It also
// accepts the plain JSON of [topology.Node.MarshalJSON] (a value starting
// with "{"), for hand-written annotations. Errors wrap [ErrBadAnnotation]
// (and the topology package's sentinel when the document itself is at
// fault) or [ErrTooLarge].
//
// Decoding is bounded: a value over [MaxAnnotationBytes], a document that
// decompresses past 4 MiB (maxDecodedAnnotationBytes), or one declaring
// more than [topology.MaxDevices] devices (or any other topology limit)
// fails with an error wrapping [ErrTooLarge] and [topology.ErrLimit]
// before the excess is allocated, so one hostile node annotation costs a
// scheduler at most a few tens of megabytes, briefly (decoding the largest
// accepted document allocates about 8 times its size).
func DecodeAnnotation(value string) (*topology.Node, error) {
	if len(value) > MaxAnnotationBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than kube.MaxAnnotationBytes (%d), what Kubernetes stores", ErrTooLarge, len(value), MaxAnnotationBytes)
	}
	var doc []byte
	switch {
	case strings.HasPrefix(value, EncodingV1):
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(value[len(EncodingV1):], "="))
		if err != nil {
			return nil, fmt.Errorf("%w: base64: %v", ErrBadAnnotation, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrBadAnnotation, err)
		}
		doc, err = io.ReadAll(io.LimitReader(zr, maxDecodedAnnotationBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrBadAnnotation, err)
		}
		if len(doc) > maxDecodedAnnotationBytes {
			return nil, fmt.Errorf("%w: decompresses to more than kube limit maxDecodedAnnotationBytes (%d)", ErrTooLarge, maxDecodedAnnotationBytes)
		}
	case strings.HasPrefix(strings.TrimSpace(value), "{"):
		doc = []byte(value)
	case value == "":
		return nil, fmt.Errorf("%w: empty value", ErrBadAnnotation)
	default:
		enc, _, _ := strings.Cut(value, ":")
		if len(enc) > 16 {
			enc = enc[:16] + "..."
		}
		return nil, fmt.Errorf("%w: unknown encoding %q (this version reads %q and plain JSON)", ErrBadAnnotation, enc, EncodingV1)
	}
	n, err := topology.ParseJSON(doc)
	if errors.Is(err, topology.ErrLimit) {
		return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnnotation, err)
	}
	return n, nil
}

// Metadata returns both the labels ([Labels]) and the annotations (the
// one [AnnotationTopology]) a node agent should patch onto the Node
// object describing n.
func Metadata(n *topology.Node) (labels, annotations map[string]string, err error) {
	labels, err = Labels(n)
	if err != nil {
		return nil, nil, err
	}
	v, err := EncodeAnnotation(n)
	if err != nil {
		return nil, nil, err
	}
	return labels, map[string]string{AnnotationTopology: v}, nil
}
