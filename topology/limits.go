package topology

import "errors"

// MaxDevices is the largest number of devices (GPUs, GCDs, partitions) one
// [Node] may hold. Every input path that builds a node (the [Builder], JSON,
// nvidia-smi text, the Kubernetes annotation, provider discovery) checks it
// before allocating anything that grows with the device count, so a small
// hostile input cannot ask for quadratic memory. The largest real servers
// have 64 partitions (8 MI300X in CPX mode); the limit leaves a wide margin.
const MaxDevices = 1024

// ErrLimit is wrapped by every error that reports an input beyond a
// documented size limit (devices per node, bytes, rows, columns, nesting).
// The message names the limit that was hit.
var ErrLimit = errors.New("gputopo: input exceeds a size limit")
