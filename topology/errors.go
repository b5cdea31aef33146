package topology

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can branch with errors.Is.
var (
	// ErrInvalidTopology is wrapped by every validation error and by
	// malformed-value errors that are not more specific.
	ErrInvalidTopology = errors.New("topology: invalid topology")
	// ErrDuplicateDevice: two devices share an index, ID or PCI address.
	ErrDuplicateDevice = errors.New("topology: duplicate device")
	// ErrUnknownDevice: a link, NIC link or lookup names a device the node does not have.
	ErrUnknownDevice = errors.New("topology: unknown device")
	// ErrSelfLink: a link from a device to itself.
	ErrSelfLink = errors.New("topology: self link")
	// ErrMissingLink: a pair of devices has no link in one or both directions.
	ErrMissingLink = errors.New("topology: missing link")
	// ErrAsymmetricLink: the two directions of a pair disagree.
	ErrAsymmetricLink = errors.New("topology: asymmetric link")
	// ErrInvalidNUMA: a NUMA id is impossible, or the NUMA distance table is malformed.
	ErrInvalidNUMA = errors.New("topology: invalid NUMA node")
	// ErrUnsupportedSchema: a JSON document names a schema this version does not read.
	ErrUnsupportedSchema = errors.New("topology: unsupported schema")
	// ErrParse: text input (JSON, nvidia-smi output) is malformed. Parse
	// errors name the line or field at fault.
	ErrParse = errors.New("topology: parse error")
)

// ValidationError is one problem a [Builder] found. Devices names the device
// indices at fault (one for a device problem, two for a pair). It wraps
// [ErrInvalidTopology] and the specific sentinel in Err.
type ValidationError struct {
	Err     error // the specific sentinel, e.g. ErrAsymmetricLink
	Devices []int // device indices at fault
	Detail  string
}

// Error formats the problem with the devices it names.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
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
func (e *ValidationError) Unwrap() []error { return []error{e.Err, ErrInvalidTopology} }
