// Package provider discovers node topologies: the [TopologyProvider]
// interface, hardware detection ([Detect]) and static providers (a file in
// our JSON schema or `nvidia-smi topo -m` form, a fixed node, or a reference
// machine from the embedded [catalog]).
//
// Hardware providers live in subpackages: provider/nvidia (NVML through cgo;
// without cgo it builds as a stub that reports errors.ErrUnsupported),
// provider/amd (KFD and amdgpu sysfs, pure Go) and provider/sysfs (any PCI
// accelerator through ghw, pure Go). [DefaultProviders] tries them in that
// order. Each is tested hermetically against recorded or generated data
// through an injectable sysfs root or a narrow NVML interface.
package provider
