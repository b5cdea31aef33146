// Command gputopo discovers, shows and explains GPU topologies, and (as its
// subcommands grow) places workloads on them.
//
//	gputopo [show] [flags]      discover this machine, or show a file or a reference machine
//	gputopo <command> -h        help for a command
//
// Run `gputopo help` for the list of commands.
package main
