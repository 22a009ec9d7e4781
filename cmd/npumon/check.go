package main

import (
	"fmt"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/replay"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newCheckCmd) }

func newCheckCmd() *cobra.Command {
	var maxPeak, maxReserved string
	var maxInactive, maxFreeFrag float64
	var noOOM, strict bool
	var baseline string
	var maxGrowth float64
	var profDirs []string
	c := &cobra.Command{
		Use:   "check FILE [--max-peak SIZE] [--max-reserved SIZE] [--max-inactive-pct PCT] [--max-free-fragmentation PCT] [--no-oom] [--baseline OLD --max-growth PCT]",
		Short: "Gate CI on a memory snapshot: exit 0 when all limits hold, 1 with one line per violation",
		Long: "check reads a memory snapshot and tests it against limits, per device:\n" +
			"  --max-peak SIZE            peak active bytes (docs/timeline.md)\n" +
			"  --max-reserved SIZE        peak reserved bytes\n" +
			"  --max-inactive-pct PCT     final inactive_fraction: inactive (cached, unused) bytes as a\n" +
			"                             percentage of reserved (--max-fragmentation is its old name)\n" +
			"  --max-free-fragmentation PCT  final free_fragmentation: 1 − largest free block / inactive\n" +
			"                             bytes, as a percentage (docs/json.md)\n" +
			"  --no-oom                   no oom trace entries\n" +
			"  --baseline OLD --max-growth PCT\n" +
			"                             peak active and peak reserved bytes at most PCT% above those\n" +
			"                             of OLD, a snapshot of the same job from an earlier run\n" +
			"SIZE accepts IEC units (KiB, MiB, GiB, TiB and K, M, G, T: powers of 1024) and SI units\n" +
			"(kB, MB, GB, TB: powers of 1000), exactly: 40GiB, 64GB, 1.5 GiB, 4096. Exit 0: all hold; 1: one\n" +
			"line per violation; 2: the file could not be read.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var lim replay.CheckLimits
			var err error
			if c.Flags().Changed("max-peak") {
				if lim.MaxPeakActive, err = bytesize.Parse(maxPeak); err != nil {
					return usageError{fmt.Errorf("--max-peak: %w", err)}
				}
				lim.HasMaxPeakActive = true
			}
			if c.Flags().Changed("max-reserved") {
				if lim.MaxPeakReserved, err = bytesize.Parse(maxReserved); err != nil {
					return usageError{fmt.Errorf("--max-reserved: %w", err)}
				}
				lim.HasMaxPeakReserved = true
			}
			pct := func(name string, v float64) (float64, bool, error) {
				if !c.Flags().Changed(name) {
					return 0, false, nil
				}
				if v < 0 || v > 100 {
					return 0, false, usageError{fmt.Errorf("--%s must be a percentage between 0 and 100, got %g", name, v)}
				}
				return v, true, nil
			}
			if lim.MaxInactivePct, lim.HasMaxInactive, err = pct("max-inactive-pct", maxInactive); err != nil {
				return err
			}
			if !lim.HasMaxInactive {
				if lim.MaxInactivePct, lim.HasMaxInactive, err = pct("max-fragmentation", maxInactive); err != nil {
					return err
				}
			}
			if lim.MaxFreeFragmentationPct, lim.HasMaxFreeFragmentation, err = pct("max-free-fragmentation", maxFreeFrag); err != nil {
				return err
			}
			lim.NoOOM = noOOM
			if !lim.HasMaxPeakActive && !lim.HasMaxPeakReserved && !lim.HasMaxInactive && !lim.HasMaxFreeFragmentation && !lim.NoOOM && baseline == "" {
				return usageError{fmt.Errorf("check needs at least one limit (--max-peak, --max-reserved, --max-inactive-pct, --max-free-fragmentation, --no-oom or --baseline with --max-growth)")}
			}
			if (baseline == "") != !c.Flags().Changed("max-growth") {
				return usageError{fmt.Errorf("--baseline and --max-growth go together")}
			}
			if maxGrowth < 0 {
				return usageError{fmt.Errorf("--max-growth must not be negative, got %g", maxGrowth)}
			}
			file, err := requireSnapshot(args[0], "check")
			if err != nil {
				return err
			}
			st, err := statsRecovered(file, replay.StatsOptions{}, profDirs, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := implausible(c.ErrOrStderr(), args[0], st.Implausible, strict); err != nil {
				return err
			}
			v := replay.Check(st, lim)
			if baseline != "" {
				base, err := replay.StatsFile(baseline, replay.StatsOptions{})
				if err != nil {
					return err
				}
				v = append(v, replay.CheckGrowth(st, base, maxGrowth)...)
			}
			if len(v) > 0 {
				return exitError{code: exitFail, msg: strings.Join(v, "\n")}
			}
			return nil
		},
	}
	c.Flags().StringVar(&maxPeak, "max-peak", "", "largest allowed peak active bytes (e.g. 40GiB)")
	c.Flags().StringVar(&maxReserved, "max-reserved", "", "largest allowed peak reserved bytes")
	c.Flags().Float64Var(&maxInactive, "max-inactive-pct", 0, "largest allowed inactive_fraction (inactive/reserved) in percent")
	c.Flags().Float64Var(&maxInactive, "max-fragmentation", 0, "old name of --max-inactive-pct")
	_ = c.Flags().MarkDeprecated("max-fragmentation", "it means inactive/reserved: use --max-inactive-pct (or --max-free-fragmentation for 1 − largest free / inactive)")
	c.Flags().Float64Var(&maxFreeFrag, "max-free-fragmentation", 0, "largest allowed free_fragmentation (1 − largest free block / inactive) in percent")
	c.Flags().StringArrayVar(&profDirs, "profiler", nil, profilerFlagHelp)
	c.Flags().BoolVar(&noOOM, "no-oom", false, "fail when the trace has oom entries")
	c.Flags().BoolVar(&strict, "strict", false, "fail (exit 2) on impossible values in the snapshot instead of warning")
	c.Flags().StringVar(&baseline, "baseline", "", "an earlier snapshot of the same job to compare peaks with (with --max-growth)")
	c.Flags().Float64Var(&maxGrowth, "max-growth", 0, "largest allowed growth of the peaks over --baseline, in percent")
	return c
}
