package main

import (
	"fmt"

	"github.com/npumon/npumon/replay"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newExportCmd) }

func newExportCmd() *cobra.Command {
	var to, schema, out string
	c := &cobra.Command{
		Use:   "export FILE --to pickle|json [--schema 1.13] -o OUT",
		Short: "Rewrite a memory snapshot as a protocol-4 pickle or JSON",
		Long: "export reads any snapshot npumon reads and writes the torch 2.x dict schema (with time_us\n" +
			"when known) as a protocol-4 pickle that Python's pickle and PyTorch's memory viewer load, or\n" +
			"as JSON of the same shape. --schema 1.13 writes the bare list of segments that torch 1.13's\n" +
			"`python3 -m torch.cuda._memory_viz stats` reads (no traces).",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			sch, err := replay.ParseExportSchema(schema)
			if err != nil {
				return usageError{err}
			}
			write := replay.WritePickle
			switch to {
			case "pickle":
			case "json":
				write = replay.WriteJSON
			default:
				return usageError{fmt.Errorf("--to must be pickle or json, got %q", to)}
			}
			if out == "" {
				return usageError{fmt.Errorf("-o OUT is required")}
			}
			capt, err := replay.DecodeFile(args[0], replay.Options{})
			if err != nil {
				return err
			}
			return replay.WriteFile(out, capt.Snapshot, write, sch)
		},
	}
	c.Flags().StringVar(&to, "to", "", "output format: pickle or json (required)")
	c.Flags().StringVar(&schema, "schema", "", "1.13 for the torch 1.13 bare list of segments")
	c.Flags().StringVarP(&out, "output", "o", "", "output file (required)")
	return c
}
