package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/whatif/sim"
)

func init() {
	subcommands = append(subcommands, newHoldersCmd, newDiffCmd, newExplainCmd)
}

// groupFlags are the grouping flags holders, diff and explain share.
type groupFlags struct {
	by       string
	library  string
	device   int
	profiler []string
	flags    *pflag.FlagSet // to tell a --device given from its default
}

func (gf *groupFlags) register(f *pflag.FlagSet) {
	gf.flags = f
	f.StringVar(&gf.by, "by", "callsite", "group by callsite (the first user frame, else the autograd node or ATen op: docs/explain.md), stack, op, stream, size or category (what the memory holds)")
	f.StringVar(&gf.library, "library", explain.DefaultLibraryPaths, "regular expression of the files of library frames (a call site skips them)")
	f.IntVar(&gf.device, "device", 0, "device (default: the file's first)")
	f.StringArrayVar(&gf.profiler, "profiler", nil, profilerFlagHelp)
}

// ops reads the ops of the profiler runs that go with snapshot file: those
// --profiler names (a run, or a directory of runs: those of the file's
// process, classify.RunsOf) and runs found with it (a job directory's,
// snapshotInput).
func (gf *groupFlags) ops(file string, found []string) ([]oprange.Op, error) {
	pid, _ := classify.PID(file)
	runs := slices.Clone(found)
	for _, p := range gf.profiler {
		rs, err := classify.RunsOf(p, pid)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	var out []oprange.Op
	for _, dir := range runs {
		d, err := profiler.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		out = append(out, watch.ProfilerOps(d.Ops, nil)...)
	}
	return out, nil
}

// grouper returns the configured grouping for d.
func (gf *groupFlags) grouper(d *explain.Device) (*explain.Grouper, error) {
	by, err := explain.ParseBy(gf.by)
	if err != nil {
		return nil, usageError{fmt.Errorf("--by: %w", err)}
	}
	g := d.Grouper(by)
	if g.Library, err = gf.libraryRE(); err != nil {
		return nil, err
	}
	return g, nil
}

func (gf *groupFlags) libraryRE() (*regexp.Regexp, error) {
	re, err := regexp.Compile(gf.library)
	if err != nil {
		return nil, usageError{fmt.Errorf("--library: %w", err)}
	}
	return re, nil
}

// openDevice decodes path (a snapshot file or a job directory,
// snapshotInput) and prepares one device with the profiler runs' ops.
func (gf *groupFlags) openDevice(path string) (*explain.Device, error) {
	path, runs, err := snapshotInput(path)
	if err != nil {
		return nil, err
	}
	ops, err := gf.ops(path, runs)
	if err != nil {
		return nil, err
	}
	c, err := decodeRecovered(path, gf.profiler, os.Stderr)
	if err != nil {
		return nil, err
	}
	dev := gf.device
	if devs := c.Snapshot.Devices(); !gf.flags.Changed("device") && len(devs) > 0 {
		dev = devs[0] // a file of one device opens on it, whichever it is
	}
	d, err := explain.NewDevice(c, dev, ops)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (devices: %v)", path, err, c.Snapshot.Devices())
	}
	return d, nil
}

func newHoldersCmd() *cobra.Command {
	var (
		gf     groupFlags
		at     string
		top    int
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "holders FILE [--at peak|end|oom[:N]|#I|TIME] [--by callsite|stack|op|stream|size] [--top N] [--json]",
		Short: "Which code holds the memory: live allocations at a moment, grouped by call site",
		Long: "holders lists the allocations live at one moment of a snapshot's trace (docs/explain.md),\n" +
			"grouped by call site — the first stack frame outside PyTorch, torch_npu, site-packages, the\n" +
			"Python standard library (--library changes the list) and native code; for a C++-only stack\n" +
			"the autograd node or ATen op — or by whole stack, op, stream or size\n" +
			"class, largest first: bytes, share of the active bytes, count, largest allocation and the\n" +
			"oldest allocation's trace entry. --at: peak (the active peak, default), end, oom or oom:N\n" +
			"(the N-th oom entry), #I (after entry I, -1 = the start) or an epoch time in µs.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if top < 0 {
				return usageError{fmt.Errorf("--top must be ≥ 0, got %d", top)}
			}
			d, err := gf.openDevice(args[0])
			if err != nil {
				return err
			}
			g, err := gf.grouper(d)
			if err != nil {
				return err
			}
			h, err := d.Holders(at, g, top)
			if err != nil {
				return usageError{err}
			}
			return writeReport(c.OutOrStdout(), asJSON, h)
		},
	}
	gf.register(c.Flags())
	c.Flags().StringVar(&at, "at", "peak", "moment: peak, end, oom[:N], #INDEX or an epoch time in µs")
	c.Flags().IntVar(&top, "top", 20, "show the N largest groups (0: all)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, times in epoch µs or null)")
	return c
}

func newDiffCmd() *cobra.Command {
	var (
		gf       groupFlags
		from, to string
		top      int
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "diff FILE --from X --to Y | diff A.pickle B.pickle [--by …] [--json]",
		Short: "What grew: live allocations of two moments (or two files of one job), group by group",
		Long: "diff compares the live allocations at two moments of one snapshot (--from and --to take what\n" +
			"holders --at takes; defaults start and end) or at the ends of two snapshots of the same job,\n" +
			"group by group: bytes and counts at both, the change, and the allocations born and freed in\n" +
			"between (within one file by address and birth entry; across files by address and size).\n" +
			"Largest change first. A warning on stderr says when two files do not look like one job\n" +
			"(other pid, device or allocator settings, ends over a week apart, nothing in common) or\n" +
			"when the diff runs backwards (to older than from); docs/explain.md.",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError{fmt.Errorf("%q takes FILE or A B, got %d argument(s)", c.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			by, err := explain.ParseBy(gf.by)
			if err != nil {
				return usageError{fmt.Errorf("--by: %w", err)}
			}
			lib, err := gf.libraryRE()
			if err != nil {
				return err
			}
			var out *explain.Diff
			if len(args) == 1 {
				d, err := gf.openDevice(args[0])
				if err != nil {
					return err
				}
				out, err = explain.DiffMoments(d, from, to, &explain.Grouper{By: by, Library: lib})
				if err != nil {
					return usageError{err}
				}
				if w := explain.MomentsWarning(out); w != "" {
					out.Warnings = []string{w}
				}
			} else {
				if c.Flags().Changed("from") || c.Flags().Changed("to") {
					return usageError{fmt.Errorf("--from and --to apply to one file; two files are compared at their ends")}
				}
				a, err := gf.openDevice(args[0])
				if err != nil {
					return err
				}
				b, err := gf.openDevice(args[1])
				if err != nil {
					return err
				}
				out = explain.DiffDevices(a, b, &explain.Grouper{By: by, Library: lib})
				out.Warnings = explain.DiffWarnings(a, b, classify.PID, lib)
			}
			for _, w := range out.Warnings {
				fmt.Fprintf(c.ErrOrStderr(), "npumon diff: warning: %s\n", w)
			}
			if top > 0 && len(out.Groups) > top {
				out.Groups = out.Groups[:top]
			}
			return writeReport(c.OutOrStdout(), asJSON, out)
		},
	}
	gf.register(c.Flags())
	c.Flags().StringVar(&from, "from", "#-1", "first moment (as holders --at)")
	c.Flags().StringVar(&to, "to", "end", "second moment")
	c.Flags().IntVar(&top, "top", 20, "show the N largest changes (0: all)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, times in epoch µs or null)")
	return c
}

func newExplainCmd() *cobra.Command {
	var (
		gf        groupFlags
		top       int
		confs     []string
		noWhatIf  bool
		forceSim  bool
		deviceMem string
		asJSON    bool
	)
	c := &cobra.Command{
		Use:   "explain FILE [--json]",
		Short: "Why it ran out: each oom explained (verdict, stack, holders, what-if) and leak suspects",
		Long: "explain reads a snapshot and, per device, explains every oom entry (or, without one, the\n" +
			"active peak): the request, the device's free bytes, reserved, allocated and cached-but-free\n" +
			"bytes, the largest cached free block, a verdict — fragmentation (the bytes exist, no block is\n" +
			"large enough) or shortage (allocated + request exceed reserved + device free) — the op and\n" +
			"stack of the failing request, the top holders, and whether the recorded trace would fit\n" +
			"with expandable_segments:True or a max_split_size_mb (replay/whatif; --conf replaces them).\n" +
			"The what-if runs where it answers something: a device with an oom entry, or a peak reserved of\n" +
			"90% of --device-mem or more; elsewhere only with --whatif or --conf.\n" +
			"Leak suspects are the call sites whose live bytes at the end of each step keep growing,\n" +
			"with the growth per step; steps come from ProfilerStep#N ranges, Optimizer.step#…\n" +
			"annotations, the optimizer's step call site or the trace's repeat period, in that order,\n" +
			"and the output names the source. See docs/explain.md.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			by, err := explain.ParseBy(gf.by)
			if err != nil {
				return usageError{fmt.Errorf("--by: %w", err)}
			}
			lib, err := gf.libraryRE()
			if err != nil {
				return err
			}
			if forceSim && noWhatIf {
				return usageError{fmt.Errorf("--whatif and --no-whatif exclude each other")}
			}
			opts := explain.Options{By: by, Top: top, Confs: confs, NoWhatIf: noWhatIf, WhatIf: forceSim, Simulate: sim.Simulate,
				Library: func(g *explain.Grouper) { g.Library = lib }}
			if c.Flags().Changed("device") {
				opts.Device = &gf.device
			}
			file, runs, err := snapshotInput(args[0])
			if err != nil {
				return err
			}
			if opts.Ops, err = gf.ops(file, runs); err != nil {
				return err
			}
			if deviceMem != "" {
				n, err := bytesize.Parse(deviceMem)
				if err != nil || n <= 0 {
					return usageError{fmt.Errorf("--device-mem %q: want a size such as 64GiB", deviceMem)}
				}
				opts.DeviceMem = n
			}
			capt, err := decodeRecovered(file, gf.profiler, c.ErrOrStderr())
			if err != nil {
				return err
			}
			// The decoder's garbage (its buffers and tables, ≈ 10 MiB for a
			// 1M-entry file) is collected now, so explain's own tables reuse
			// it: otherwise the heap is short of its next collection and each
			// of their pages is a fresh one (a page fault, microseconds each).
			runtime.GC()
			opts.MemUsage = memUsageBeside(file, capt.Snapshot.Devices(), c.ErrOrStderr())
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			e, err := explain.Explain(ctx, capt, opts)
			if err != nil {
				return usageError{err}
			}
			return writeReport(c.OutOrStdout(), asJSON, e)
		},
	}
	gf.register(c.Flags())
	c.Flags().IntVar(&top, "top", 5, "top holders per oom")
	c.Flags().StringArrayVar(&confs, "conf", nil, "an alternative allocator configuration to try (repeatable; default expandable_segments:True and a max_split_size_mb)")
	c.Flags().BoolVar(&noWhatIf, "no-whatif", false, "skip the what-if simulation")
	c.Flags().BoolVar(&forceSim, "whatif", false, "run the what-if even without an oom entry or a peak near --device-mem")
	c.Flags().StringVar(&deviceMem, "device-mem", "", "simulated device memory for the what-if, e.g. 64GiB (default: from the file)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, times in epoch µs or null)")
	return c
}
