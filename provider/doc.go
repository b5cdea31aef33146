// Package provider discovers node topologies: the [TopologyProvider]
// interface, hardware detection ([Detect]) and static providers (a file in
// our JSON schema or `nvidia-smi topo -m` form, a fixed node, or a reference
// machine from the embedded [catalog]).
//
// Hardware providers live in subpackages so that nothing here needs cgo or a
// vendor library: provider/nvidia (NVML), provider/amd (KFD sysfs) and
// provider/sysfs (any PCI accelerator). Each is tested hermetically against
// recorded data through an injectable root or a narrow interface.
package provider
