// Command gputopo discovers, shows and explains GPU topologies, places
// workloads on them, and plans gangs and partitions.
//
//	gputopo                         the list of commands (also -h, help)
//	gputopo show [flags]            discover this machine, or show a file or a reference machine
//	gputopo help <command>          a command's flags (also gputopo <command> -h)
//	gputopo serve [flags]           a web page: node graph, partitions, placement, gang, simulator;
//	                                with --cluster FILE, the whole cluster at /cluster/
//
// Conventions every command follows:
//
//   - The command comes first, then its flags: gputopo show --machine dgx-h100.
//   - Every command that prints data takes --json for machine-readable output
//     (show also takes --dot for Graphviz); warnings then go to stderr.
//   - Nothing is written into the working directory unless a flag names a
//     file or directory (simulate --out DIR, capture -o FILE).
//   - Long commands report progress on stderr (simulate: a line per
//     policy and seed); -q silences it.
//
// Exit codes:
//
//	0  ok; the request fits
//	1  does not fit, no plan, or nothing detected (gang, place,
//	   mig place/defrag/template, detect)
//	2  usage error or bad input: a flag, a missing or malformed file, a value
//	3  internal error (a bug in gputopo), or interrupted / timed out
//
// Building: the first build compiles the NVML bindings
// (github.com/NVIDIA/go-nvml/pkg/nvml, which provider/nvidia imports). Its
// nvml.h marks about 30 functions DEPRECATED(13.0) with no macro to turn
// that off, and gcc warns once per function it wraps; a #cgo directive in
// another package cannot reach that compilation. To build quietly, either
//
//	CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go run ./examples/gputopo show
//	go env -w CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations"   # once, for this user
//
// or build without cgo (CGO_ENABLED=0), which leaves NVML out (the sysfs and
// amd providers still answer). Later builds come from the build cache and
// print nothing.
//
// Run `gputopo help` for the list of commands.
package main
