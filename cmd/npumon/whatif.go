package main

import (
	"context"
	"fmt"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/replay/whatif/sim"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newWhatifCmd) }

func newWhatifCmd() *cobra.Command {
	var (
		confs     []string
		deviceMem string
		flavour   string
		model     string
		asJSON    bool
		device    int
		profDirs  []string
	)
	c := &cobra.Command{
		Use:   "whatif FILE [--conf STR]... [--device-mem SIZE] [--json]",
		Short: "Re-simulate a recorded trace under other allocator settings",
		Long: "whatif replays each device's recorded allocation sequence through the caching allocator, once\n" +
			"with the file's own settings (allocator_settings, else the defaults) and once per --conf\n" +
			"(PYTORCH_NPU_ALLOC_CONF syntax; PYTORCH_CUDA_ALLOC_CONF for CUDA files), and reports peak\n" +
			"reserved / allocated, segments, cached free bytes at the peak, retries, OOMs and how closely the\n" +
			"baseline follows the recorded reserved curve. Without --conf it tries expandable_segments:True and\n" +
			"max_split_size_mb of half the first failing request (explain and the TUI's w try the same). An\n" +
			"alternative is called a fix only when the baseline reproduces the recording (its peak reserved and\n" +
			"its OOM); otherwise the report says why not. The device size is --device-mem, else derived\n" +
			"from an oom entry, else the recorded peak plus 12.5% headroom; the report says which.\n" +
			"empty_cache calls are inferred from segment releases outside a malloc.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var opts whatif.Options
			opts.Confs = confs
			if deviceMem != "" {
				n, err := bytesize.Parse(deviceMem)
				if err != nil || n <= 0 {
					return usageError{fmt.Errorf("--device-mem %q: want a size such as 64GiB", deviceMem)}
				}
				opts.DeviceMem = n
			}
			switch flavour {
			case "auto":
			case "npu", "cuda":
				f := config.FlavourNPU
				if flavour == "cuda" {
					f = config.FlavourCUDA
				}
				opts.Flavour = &f
			default:
				return usageError{fmt.Errorf("--flavour %q: want auto, npu or cuda", flavour)}
			}
			switch model {
			case "auto":
			case "contiguous", "paged":
				contiguous := model == "contiguous"
				opts.Contiguous = &contiguous
			default:
				return usageError{fmt.Errorf("--device-model %q: want auto, contiguous or paged", model)}
			}
			if c.Flags().Changed("device") {
				opts.Devices = []int{device}
			}
			file, err := requireSnapshot(args[0], "whatif")
			if err != nil {
				return err
			}
			capt, err := decodeRecovered(file, profDirs, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if len(opts.Confs) == 0 { // the one set explain and the TUI try too
				opts.Confs = whatif.Alternatives(capt.Snapshot, opts.Devices)
			}
			res, err := sim.Simulate(context.Background(), capt, opts)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", file, err)}
			}
			return writeReport(c.OutOrStdout(), asJSON, res)
		},
	}
	c.Flags().StringArrayVar(&profDirs, "profiler", nil, profilerFlagHelp)
	c.Flags().StringArrayVar(&confs, "conf", nil, "an alternative allocator configuration, e.g. expandable_segments:True (repeatable; default: expandable_segments:True and a max_split_size_mb, as explain and the TUI)")
	c.Flags().StringVar(&deviceMem, "device-mem", "", "simulated device memory, e.g. 64GiB (default: from the file)")
	c.Flags().StringVar(&flavour, "flavour", "auto", "allocator to imitate: auto (from the file), npu or cuda")
	c.Flags().StringVar(&model, "device-model", "auto", "contiguous (one free range per device allocation, as npumon's simulated NPU), paged (bytes only), or auto (contiguous for NPU files)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (sizes in bytes, curves as change points)")
	c.Flags().IntVar(&device, "device", 0, "only this device")
	return c
}
