package main

import (
	"fmt"
	"os"

	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/replay"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newStatsCmd) }

func newStatsCmd() *cobra.Command {
	var asJSON, strict bool
	var device, atIndex int
	var profDirs []string
	c := &cobra.Command{
		Use:   "stats [--json] [--device N] [--at-index I] FILE|DIR",
		Short: "Summarise a memory snapshot file (or a profiler directory)",
		Long: "stats reads a torch / torch_npu memory snapshot (pickle protocol 2–5 or JSON, every schema\n" +
			"from torch 1.13 on) and prints per device: segments, blocks, reserved / allocated / active /\n" +
			"requested / inactive bytes, the largest free block, trace actions, the active-bytes peak and\n" +
			"the reserved peak (docs/timeline.md). --at-index I describes the moment right after trace\n" +
			"entry I (0-based; -1 is the start). Profiler output (a directory, its SQLite export or a\n" +
			"trace_view.json) is recognised by its content and summarised as profiler data.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			path := args[0]
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				members, err := jobdir.Find(path)
				if err != nil {
					return err
				}
				if members != nil {
					if c.Flags().Changed("device") || c.Flags().Changed("at-index") {
						return usageError{fmt.Errorf("%s holds %s: --device and --at-index take one capture (name a rank's file)", path, jobdir.Describe(members))}
					}
					rs, err := statsRanks(path, members)
					if err != nil {
						return err
					}
					if asJSON {
						return writeJSON(c.OutOrStdout(), rs)
					}
					return rs.writeText(c.OutOrStdout())
				}
			}
			// a job's dump directory: its newest snapshot (else run)
			if j, ok, err := jobInput(path); err != nil {
				return err
			} else if ok {
				path = j.Open()
			}
			in, err := classifyInput(path)
			if err != nil {
				return err
			}
			switch {
			case in.Kind.Profiler():
				return statsProfiler(path, asJSON, c.OutOrStdout(), c.ErrOrStderr())
			case !in.Kind.Snapshot():
				return unreadable(in)
			}
			var opts replay.StatsOptions
			if c.Flags().Changed("device") {
				opts.Device = &device
			}
			if c.Flags().Changed("at-index") {
				opts.AtIndex = &atIndex
			}
			st, err := statsRecovered(path, opts, profDirs, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := implausible(c.ErrOrStderr(), path, st.Implausible, strict); err != nil {
				return err
			}
			return writeReport(c.OutOrStdout(), asJSON, st)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, times in epoch µs or null)")
	c.Flags().BoolVar(&strict, "strict", false, "fail (exit 2) on impossible values in the snapshot instead of warning")
	c.Flags().IntVar(&device, "device", 0, "only this device")
	c.Flags().IntVar(&atIndex, "at-index", 0, "describe the state right after trace entry I (0-based, -1 = start)")
	c.Flags().StringArrayVar(&profDirs, "profiler", nil, profilerFlagHelp)
	return c
}
