package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// The commit a binary was built from. `make build` and `make dist` set these
// with -ldflags "-X main.commit=… -X main.commitTime=… -X main.modified=true";
// a binary built without them (go install of a module, go build in a
// checkout) falls back to the VCS stamp Go writes into its build info.
var (
	commit     = "" // full hash of the commit
	commitTime = "" // the commit's time, RFC 3339 in UTC
	modified   = "" // "true" when the tree had uncommitted changes
)

// buildCommit is the commit the binary was built from, as far as it knows:
// the ldflags values, else the build info's vcs.revision / vcs.time /
// vcs.modified. rev is empty when neither says.
func buildCommit() (rev, at string, dirty bool) {
	if commit != "" {
		return commit, commitTime, modified == "true"
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return rev, at, dirty
}

// writeVersion prints what `npumon version` prints: the version on the first
// line (the shape versionPattern describes), then the commit and the Go
// toolchain and platform the binary was built for.
func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "npumon %s\n", version)
	rev, at, dirty := buildCommit()
	switch {
	case rev == "":
		fmt.Fprintln(w, "commit unknown (built without version control information)")
	default:
		line := "commit " + rev
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			line += " " + t.UTC().Format(time.RFC3339)
		}
		if dirty {
			line += " (with uncommitted changes)"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "built with %s for %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the npumon version, the commit it was built from and its platform",
		Args:  noArgs,
		Run: func(c *cobra.Command, _ []string) {
			writeVersion(c.OutOrStdout())
		},
	}
}
