package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/replay"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newExportCmd) }

// defaultExportMax caps export's output: JSON repeats a stack at every
// reference a pickle shares, so a small pickle can expand enormously.
const defaultExportMax = 4 << 30

func newExportCmd() *cobra.Command {
	var to, schema, out string
	var pretty bool
	var profDirs []string
	maxSize := sizeFlag(defaultExportMax)
	c := &cobra.Command{
		Use:   "export FILE --to pickle|json [--pretty] [--schema 1.13] -o OUT",
		Short: "Rewrite a memory snapshot as a protocol-4 pickle or JSON",
		Long: "export reads any snapshot npumon reads and writes the torch 2.x dict schema (with time_us\n" +
			"when known) as a protocol-4 pickle that Python's pickle and PyTorch's memory viewer load, or\n" +
			"as JSON. --schema 1.13 writes the bare list of segments that torch 1.13's\n" +
			"`python3 -m torch.cuda._memory_viz stats` reads (no traces).\n\n" +
			"--to json writes npumon's compact JSON: each distinct frame and stack once, in a frame_table\n" +
			"and a stack_table first, and every block and entry naming its stack by index (\"stack\": 3);\n" +
			"npumon reads it back (docs/files.md). --pretty writes the torch shape instead, every stack\n" +
			"written out at each block and entry that names it, as tools that read torch's layout want:\n" +
			"JSON has no shared references, so that can be many times the pickle, and an output that\n" +
			"would pass --max-size (default 4GiB) is refused before anything is written.\n\n" +
			"OUT is written through a temporary file in its directory (random name, created exclusively)\n" +
			"renamed into place when complete: an error or an interrupt leaves nothing behind.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			sch, err := replay.ParseExportSchema(schema)
			if err != nil {
				return usageError{err}
			}
			write := replay.WritePickle
			switch to {
			case "pickle":
				if pretty {
					return usageError{fmt.Errorf("--pretty is for --to json")}
				}
			case "json":
				write = replay.WriteCompactJSON
				if pretty {
					write = replay.WriteJSON
				}
			default:
				return usageError{fmt.Errorf("--to must be pickle or json, got %q", to)}
			}
			if out == "" {
				return usageError{fmt.Errorf("-o OUT is required")}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			file, err := requireSnapshot(args[0], "export")
			if err != nil {
				return err
			}
			capt, err := decodeRecovered(file, profDirs, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if to == "json" && (pretty || sch == replay.ExportList113) {
				if n := replay.JSONSize(capt.Snapshot, sch); n > int64(maxSize) {
					return fmt.Errorf("%s: the JSON would be %s (stacks repeated at each of their references; the pickle shares them), over --max-size %s; nothing written",
						out, bytesize.Torch(n), bytesize.Torch(int64(maxSize)))
				}
			}
			return replay.WriteFileWith(out, capt.Snapshot, write, sch, replay.WriteOptions{Context: ctx, MaxBytes: int64(maxSize)})
		},
	}
	c.Flags().StringVar(&to, "to", "", "output format: pickle or json (required)")
	c.Flags().StringVar(&schema, "schema", "", "1.13 for the torch 1.13 bare list of segments")
	c.Flags().BoolVar(&pretty, "pretty", false, "with --to json: the torch shape, every stack written out at each reference (not npumon's compact tables)")
	c.Flags().StringVarP(&out, "output", "o", "", "output file (required)")
	c.Flags().StringArrayVar(&profDirs, "profiler", nil, profilerFlagHelp)
	c.Flags().Var(&maxSize, "max-size", "refuse to write more than this (e.g. 512MiB, 8GiB)")
	return c
}
