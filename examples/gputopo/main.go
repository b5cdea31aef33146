package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/gputopo/gputopo/mig"
	"github.com/gputopo/gputopo/scoring"
	"github.com/gputopo/gputopo/topology"
)

// command is one subcommand. run receives the arguments after the command
// name and writes to stdout; it returns errUsage for bad flags.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// Exit codes, documented in doc.go and `gputopo help`.
const (
	exitOK       = 0 // success; the request fits
	exitNoFit    = 1 // the request does not fit, or there is no plan
	exitUsage    = 2 // usage error or bad input (a flag, a file, a value)
	exitInternal = 3 // internal error: a bug in gputopo
)

// errUsage marks an error already explained by the flag package.
var errUsage = errors.New("usage")

// errNoFit marks a command's answer "does not fit" / "no plan", already
// printed; the exit code is exitNoFit.
var errNoFit = errors.New("does not fit")

// noFitError is a "does not fit" answer with its own message; it matches
// errNoFit.
type noFitError struct{ msg string }

func (e noFitError) Error() string        { return e.msg }
func (e noFitError) Is(target error) bool { return target == errNoFit }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	if len(args) == 0 || isHelp(args[0]) || (args[0] == "help" && len(args) == 1) {
		usage(stdout)
		return exitOK
	}
	name := args[0]
	if name == "help" {
		c, ok := commands[args[1]]
		if !ok {
			unknownCommand(stderr, args[1])
			return exitUsage
		}
		_ = c.run(ctx, append(args[2:], "-h"), stdout, stdout)
		return exitOK
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "gputopo: %s: the command comes first, then its flags", name)
		hint := "show" // the flags are most likely show's
		rest := args
		for k, a := range args[1:] {
			if _, ok := commands[a]; ok {
				hint = a
				rest = append(slices.Clone(args[k+2:]), args[:k+1]...)
				break
			}
		}
		fmt.Fprintf(stderr, ", e.g. gputopo %s %s\n(run `gputopo help` for the commands)\n", hint, strings.Join(rest, " "))
		return exitUsage
	}
	c, ok := commands[name]
	if !ok {
		unknownCommand(stderr, name)
		return exitUsage
	}
	args = args[1:]
	errw := stderr
	if slices.ContainsFunc(args, isHelp) {
		errw = stdout // help asked for goes to stdout
	}
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "gputopo %s: internal error (a bug; please report it): %v\n", name, p)
			code = exitInternal
		}
	}()
	// Names from input files reach the terminal escaped (render.go).
	so, se := newTermSafe(stdout), newTermSafe(stderr)
	defer func() { _, _ = so.Flush(), se.Flush() }()
	ew := se
	if errw == stdout {
		ew = so
	}
	return exitCode(se, name, c.run(ctx, args, so, ew))
}

// exitCode reports err (unless the flag package or the command already
// did) and maps it to the documented exit code.
func exitCode(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case err == errNoFit: //nolint:errorlint // the bare sentinel: the answer is already printed
		return exitNoFit
	}
	fmt.Fprintf(stderr, "gputopo %s: %v\n", name, err)
	switch {
	case errors.Is(err, errNoFit), errors.Is(err, mig.ErrNoPlan), errors.Is(err, scoring.ErrInsufficientDevices),
		errors.Is(err, scoring.ErrRequiredUnavailable), errors.Is(err, scoring.ErrUnsatisfiable):
		return exitNoFit
	case errors.Is(err, topology.ErrInternal), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return exitInternal
	}
	return exitUsage
}

func unknownCommand(w io.Writer, name string) {
	fmt.Fprintf(w, "gputopo: unknown command %q", name)
	for n := range commands {
		if strings.HasPrefix(n, name) || strings.HasPrefix(name, n) {
			fmt.Fprintf(w, " (did you mean %q?)", n)
			break
		}
	}
	fmt.Fprint(w, "\n\n")
	usage(w)
}

const exitCodesHelp = `exit codes:
  0  ok; the request fits
  1  does not fit, no plan, or nothing detected (gang, place, mig place/defrag/template, detect)
  2  usage error or bad input: a flag, a missing or malformed file, a value
  3  internal error (a bug in gputopo), or interrupted / timed out`

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gputopo <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n`gputopo help <command>` (or `gputopo <command> -h`) lists a command's flags.")
	fmt.Fprintln(w, "Every command that prints data takes --json for machine-readable output.")
	fmt.Fprintln(w, "\n"+exitCodesHelp)
}

// newFlagSet returns a flag set that reports errors through errUsage and
// whose usage leaves out hidden (deprecated) flags.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gputopo "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gputopo %s [flags]\n", name)
		if c, ok := commands[name]; ok {
			fmt.Fprintf(fs.Output(), "\n%s\n", c.summary)
		}
		fmt.Fprintln(fs.Output(), "\nflags:")
		printDefaults(fs)
	}
	return fs
}

// hidden marks a flag's usage: deprecated aliases are left out of -h.
const hidden = "deprecated: "

// printDefaults is fs.PrintDefaults without the hidden flags.
func printDefaults(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Usage, hidden) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.PrintDefaults()
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q", fs.Name(), fs.Args())
		a := fs.Arg(0)
		switch {
		case fs.Lookup("topology") != nil && isFile(a):
			fmt.Fprintf(fs.Output(), " (a topology file goes after --topology: --topology %s)", a)
		case strings.HasPrefix(a, "-"):
			fmt.Fprint(fs.Output(), " (flags must come before other arguments)")
		default:
			fmt.Fprint(fs.Output(), " (this command takes flags only; a value with spaces needs quotes)")
		}
		fmt.Fprintf(fs.Output(), "\nrun `gputopo help %s` for its flags\n", strings.TrimPrefix(fs.Name(), "gputopo "))
		return errUsage
	}
	return nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// inputError says a file could not be read in words a person can act on:
// missing, unreadable, or (otherwise) the error itself.
func inputError(what, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", what, path, fs.ErrNotExist)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s %s: %w", what, path, fs.ErrPermission)
	}
	return err
}
