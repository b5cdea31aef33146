package topology

import (
	"errors"
	"fmt"
	"strings"
)

// Canonical sentinels. Errors of every gputopo package wrap one of these
// four (or the standard library's [errors.ErrUnsupported]) whenever one
// applies, so a caller can decide what to do with an error without knowing
// which package returned it; docs/errors.md at the repository root lists
// every package sentinel and the canonical one it is or wraps. [ErrLimit]
// is the fourth canonical sentinel (declared with the limits).
var (
	// ErrParse is wrapped by every error that reports malformed input of
	// any kind: text (nvidia-smi output, cpulists, PCI addresses, enum
	// names), JSON or YAML documents, CSV traces, sysfs values, Kubernetes
	// labels and annotations. Packages that had their own "malformed"
	// sentinel re-export this value under the name ErrParse. Parse errors
	// name the line, field or value at fault.
	ErrParse = errors.New("gputopo: malformed input")

	// ErrInvalidRequest is wrapped by every error that reports a caller's
	// argument, option or request out of range: a negative count, a NaN
	// weight, an enum value outside its constants, a nil node, an
	// inconsistent topology or cluster description. Package-specific
	// "invalid X" sentinels ([ErrInvalidTopology], [ErrInvalidCluster],
	// scoring's, gang's, mig's ...) are distinct values that wrap it, so
	// both errors.Is checks hold.
	ErrInvalidRequest = errors.New("gputopo: invalid request")

	// ErrInternal is wrapped by every error that reports a failed internal
	// invariant: a path that cannot be taken unless gputopo has a bug.
	// Such an error is never the caller's fault; please report it.
	ErrInternal = errors.New("gputopo: internal error")
)

// ErrInvalidTopology is the package's own sentinel; the problems below are
// kept unexported: a validation error's message names the problem and the
// devices at fault, and errors.Is with ErrInvalidTopology tells that the
// description, not the input's syntax, is at fault.
var (
	// ErrInvalidTopology is wrapped by every validation error of a
	// [Builder] (and so of [ParseJSON], which also wraps [ErrParse]). It
	// wraps [ErrInvalidRequest].
	ErrInvalidTopology = fmt.Errorf("topology: invalid topology: %w", ErrInvalidRequest)
	// errDuplicateDevice: two devices share an index, ID or PCI address.
	errDuplicateDevice = errors.New("topology: duplicate device")
	// errUnknownDevice: a link, NIC link or lookup names a device the node does not have.
	errUnknownDevice = errors.New("topology: unknown device")
	// errSelfLink: a link from a device to itself.
	errSelfLink = errors.New("topology: self link")
	// errMissingLink: a pair of devices has no link in one or both directions.
	errMissingLink = errors.New("topology: missing link")
	// errAsymmetricLink: the two directions of a pair disagree.
	errAsymmetricLink = errors.New("topology: asymmetric link")
	// errInvalidNUMA: a NUMA id is impossible, or the NUMA distance table is malformed.
	errInvalidNUMA = errors.New("topology: invalid NUMA node")
	// errUnsupportedSchema: a JSON document names a schema this version
	// does not read. It wraps ErrParse.
	errUnsupportedSchema = fmt.Errorf("topology: unsupported schema: %w", ErrParse)
)

// validationError is one problem a [Builder] found. Devices names the device
// indices at fault (one for a device problem, two for a pair); the message
// names them. It wraps [ErrInvalidTopology] and the specific sentinel in Err.
type validationError struct {
	Err     error // the specific sentinel, e.g. errAsymmetricLink
	Devices []int // device indices at fault
	Detail  string
}

// Error formats the problem with the devices it names.
func (e *validationError) Error() string {
	var b strings.Builder
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString(ErrInvalidTopology.Error())
	}
	switch len(e.Devices) {
	case 0:
	case 1:
		fmt.Fprintf(&b, ": device %d", e.Devices[0])
	case 2:
		fmt.Fprintf(&b, ": devices %d and %d", e.Devices[0], e.Devices[1])
	default:
		fmt.Fprintf(&b, ": devices %v", e.Devices)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the specific sentinel and ErrInvalidTopology.
func (e *validationError) Unwrap() []error { return []error{e.Err, ErrInvalidTopology} }
