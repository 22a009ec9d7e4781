// Command npumon is a terminal monitor for device memory and profiling on
// Ascend NPU hosts. This package only wires flags and subcommands; the logic
// lives in the library packages.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// version is what `npumon version` prints: a semantic version. This value is
// the base a plain `go build` reports; `make build` sets it with
// -ldflags "-X main.version=…" to the base plus the commit as build metadata
// (0.1.0-dev+e16c67d, with .dirty for uncommitted changes), or to X.Y.Z
// when the commit is tagged vX.Y.Z. versionPattern is the shape all three
// take. The commit itself is in version.go.
var version = "0.1.0-dev"

// versionPattern matches every version npumon reports (semver 2.0.0).
const versionPattern = `^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and found a problem (e.g. check violations)
	exitUsage = 2 // bad flags, bad arguments or unreadable input
)

// usageError marks errors that come from the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries a specific exit code with an optional message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// writeJSON prints v as the indented JSON every --json / --headless output uses.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// textReport is a result that prints itself as text as well as JSON.
type textReport interface {
	WriteText(w io.Writer) error
}

// writeReport prints r as indented JSON when asJSON, else as its text.
func writeReport(w io.Writer, asJSON bool, r textReport) error {
	if asJSON {
		return writeJSON(w, r)
	}
	return r.WriteText(w)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "npumon",
		Short:         "Terminal monitor for NPU device memory and profiling",
		Long:          "npumon shows device memory (segments, blocks, alloc/free timelines) and profiler ops on\nAscend NPU hosts, live or from saved snapshots, keyed by epoch time.",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{err}
	})
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	root.AddCommand(newVersionCmd())
	return root
}

// subcommands is filled by init functions in this package, one file per command.
var subcommands []func() *cobra.Command

// noArgs rejects positional arguments with a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q for %q", args[0], c.CommandPath())}
	}
	return nil
}

// exactArgs requires n positional arguments.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%q takes %d argument(s), got %d", c.CommandPath(), n, len(args))}
		}
		return nil
	}
}

// run executes the CLI and returns the process exit code.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(os.Stderr, "npumon: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintln(os.Stderr, "Run 'npumon --help' for usage.")
	}
	// Usage errors and unreadable input both exit 2; commands that need
	// another code return an exitError.
	return exitUsage
}

func main() {
	os.Exit(run(os.Args[1:]))
}
