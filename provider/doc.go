// Package provider discovers node topologies: the [TopologyProvider]
// interface and static providers (a file in our JSON schema or
// `nvidia-smi topo -m` form, a fixed node, or a reference machine from the
// embedded [catalog]). Importing it links no vendor library.
//
// Hardware providers live in subpackages: provider/nvidia (NVML through cgo;
// without cgo it builds as a stub that reports errors.ErrUnsupported),
// provider/amd (KFD and amdgpu sysfs, pure Go) and provider/sysfs (any PCI
// accelerator through ghw, pure Go). Package provider/detect tries them in
// that order. Each is tested hermetically against recorded or generated data
// through an injectable filesystem or a narrow NVML interface.
//
// # Roots and fakes
//
// Every hardware provider's WithRoot option means the same thing: the
// filesystem root, the directory under which sys/... is found ("/" by
// default). provider/amd and provider/nvidia (its sysfs fallback) also take
// any io/fs.FS holding the same tree (WithFS); provider/sysfs needs a real
// directory, because ghw enumerates the PCI bus through real paths.
// Package provider/sysfstest builds fake trees in memory for WithFS and
// writes them to a directory for WithRoot; provider/nvidia/nvidiatest fakes
// NVML.
package provider
