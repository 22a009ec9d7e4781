package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/classify"
)

// classifyInput decides what path is by its content (replay/classify), the
// one way every command reads its argument.
func classifyInput(path string) (classify.Input, error) {
	return classify.Path(path)
}

// requireSnapshot is the check of the commands that read snapshot files
// only (check, whatif, export): anything else is refused with one line
// naming what the path is.
func requireSnapshot(path, cmd string) error {
	in, err := classifyInput(path)
	if err != nil {
		return err
	}
	return in.SnapshotOnly(cmd)
}

// unreadable is the error for an input no command reads.
func unreadable(in classify.Input) error { return errors.New(in.Describe()) }

// implausible reports what replay.Sanity found in path's snapshot: a
// warning on w naming the first offender, or with strict the error.
func implausible(w io.Writer, path string, p *replay.Implausible, strict bool) error {
	if p == nil {
		return nil
	}
	if strict {
		return fmt.Errorf("%s: impossible values: %v", path, p)
	}
	fmt.Fprintf(w, "npumon: warning: %s: impossible values, figures are suspect: %v (--strict makes this an error)\n", path, p)
	return nil
}
