// Package collector is a Prometheus collector for one node's
// accelerators: per device memory, utilisation, temperature, health and
// use; per MIG instance memory; and gauges derived from the topology with
// gputopo's packages: the largest free NVLink/xGMI-connected set, the best
// score a job of 1, 2, 4 or 8 GPUs would get now (package scoring), and MIG
// free slots, fragmentation and free placements per profile (package mig).
//
// It reads a Source at most once per scrape, and not within
// Options.Refresh of the previous read; readings a provider cannot make (a
// temperature, a utilisation) are left out, never reported as zero. The
// metric names are listed in ../README.md.
package collector
