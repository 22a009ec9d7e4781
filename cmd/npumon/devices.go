package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/devpoll"
	"github.com/npumon/npumon/monitor/npusmi"
	"github.com/npumon/npumon/tui"
)

func init() { subcommands = append(subcommands, newDevicesCmd) }

// Environment variables for the npu-smi flags (the flags win).
const (
	envNPUSMI         = "NPUMON_NPU_SMI"
	envNPUSMIInterval = "NPUMON_NPU_SMI_INTERVAL"
)

// npuSMIFlags are the flags that say how to read the host's devices: the
// devices command and every command with a devices view (key D) take them.
type npuSMIFlags struct {
	path  string
	every time.Duration
	flags *pflag.FlagSet
}

// addNPUSMIFlags registers --npu-smi and --npu-smi-interval on c.
func addNPUSMIFlags(c *cobra.Command) *npuSMIFlags {
	n := &npuSMIFlags{flags: c.Flags()}
	n.flags.StringVar(&n.path, "npu-smi", "npu-smi", "the npu-smi executable to run (env "+envNPUSMI+"; a bare name is looked up on PATH)")
	n.flags.DurationVar(&n.every, "npu-smi-interval", time.Second, "how often the devices view runs npu-smi (env "+envNPUSMIInterval+")")
	return n
}

// options resolves the flags and their environment variables.
func (n *npuSMIFlags) options() (devpoll.Options, error) {
	o := devpoll.Options{Path: n.path, Every: n.every}
	if v := os.Getenv(envNPUSMI); v != "" && !n.flags.Changed("npu-smi") {
		o.Path = v
	}
	if v := os.Getenv(envNPUSMIInterval); v != "" && !n.flags.Changed("npu-smi-interval") {
		d, err := time.ParseDuration(v)
		if err != nil {
			return o, usageError{fmt.Errorf("%s=%q: %v", envNPUSMIInterval, v, err)}
		}
		o.Every = d
	}
	if o.Every < 100*time.Millisecond || o.Every > time.Hour {
		return o, usageError{fmt.Errorf("the npu-smi interval must be between 100ms and 1h, got %v", o.Every)}
	}
	return o, nil
}

// hostDevices starts the background npu-smi poller for a command's devices
// view; it polls only while the view is shown. stop ends it.
func hostDevices(ctx context.Context, n *npuSMIFlags) (feed tui.DeviceFeed, stop func(), err error) {
	o, err := n.options()
	if err != nil {
		return nil, nil, err
	}
	p := devpoll.New(o)
	return p, runFeed(ctx, p), nil
}

// runFeed runs p in the background until the returned stop is called.
func runFeed(ctx context.Context, p *devpoll.Poller) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer crash.Recover(); p.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func newDevicesCmd() *cobra.Command {
	var (
		n      int
		asJSON bool
		sim    bool
		watch  bool
		usages bool
		ascii  bool
	)
	var smi *npuSMIFlags // set below, read when the command runs
	c := &cobra.Command{
		Use:   "devices",
		Short: "List the host's NPUs as npu-smi reports them (HBM, AICore, power, temperature, processes)",
		Long: "devices runs the host's `npu-smi info` and prints, per NPU chip, its name, health, power,\n" +
			"temperature, AICore usage and HBM used / total (MB = MiB, as npu-smi counts; 310B/310P\n" +
			"have no HBM and show their Memory-Usage instead), then the processes holding device\n" +
			"memory. --json prints the same figures in bytes. --watch opens the devices view of the\n" +
			"terminal UI and keeps polling. Without npu-smi the command says so and fails.\n" +
			"The npu-smi to run is --npu-smi or $" + envNPUSMI + " (default: npu-smi on PATH), the\n" +
			"polling interval --npu-smi-interval or $" + envNPUSMIInterval + ".\n" +
			"--sim lists the devices of npumon's simulated ACL runtime instead (--devices N of them):\n" +
			"id, name, health, HBM used / total and live streams of Ascend910B3 devices with 64 GiB,\n" +
			"3 GiB of which the system keeps (a total of 61 GiB, 62464 MB).",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if sim {
				infos, err := simDevices(n)
				if err != nil {
					return err
				}
				if watch {
					return watchDevices(c, devpoll.NewFunc("simulated ACL runtime", time.Second,
						func() *npusmi.Info { return simInfo(infos, 0, "") }), "simulated", ascii)
				}
				if asJSON {
					return writeDevicesJSON(c.OutOrStdout(), infos)
				}
				writeDevicesTable(c.OutOrStdout(), infos)
				return nil
			}
			if c.Flags().Changed("devices") {
				return usageError{errors.New("--devices counts simulated devices: use it with --sim")}
			}
			o, err := smi.options()
			if err != nil {
				return err
			}
			o.Usages = usages
			if watch {
				o.Always = true
				return watchDevices(c, devpoll.New(o), o.Path, ascii)
			}
			s := devpoll.New(o).Poll(c.Context())
			if s.Err != nil {
				return npuSMIError(s.Err)
			}
			if asJSON {
				return writeJSON(c.OutOrStdout(), npuJSONOf(s.Info, s.Usages))
			}
			return writeNPUTable(c.OutOrStdout(), s.Info, o.Path)
		},
	}
	smi = addNPUSMIFlags(c)
	f := c.Flags()
	f.BoolVar(&sim, "sim", false, "list the simulated ACL runtime's devices instead of the host's")
	f.IntVar(&n, "devices", 1, "with --sim: number of simulated devices")
	f.BoolVar(&asJSON, "json", false, "print a JSON array (one object per chip) instead of the table")
	f.BoolVar(&watch, "watch", false, "show the devices view of the terminal UI, polling npu-smi")
	f.BoolVar(&usages, "usages", false, "also run npu-smi info -t usages -i N for each NPU (--json adds usages_pct)")
	f.BoolVar(&ascii, "ascii", false, "with --watch: draw with ASCII characters only (NO_COLOR drops colour)")
	return c
}

// npuSMIError is the one-line failure of a command that needed npu-smi.
func npuSMIError(err error) error {
	msg := "npumon devices: " + err.Error()
	if errors.Is(err, devpoll.ErrNotFound) {
		msg += "\nnpumon reads the host's NPUs with npu-smi (part of the Ascend driver): give its path with " +
			"--npu-smi or " + envNPUSMI + "; --sim lists simulated devices instead"
	}
	return exitError{code: exitFail, msg: msg}
}

// watchDevices runs the devices view alone until the user quits.
func watchDevices(c *cobra.Command, p *devpoll.Poller, name string, ascii bool) error {
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer runFeed(ctx, p)()
	return tui.Run(ctx, tui.Options{Devices: p, DevicesOnly: true, SourceName: name, Live: true, ASCII: ascii})
}

// simInfo is a simulated runtime's devices as npu-smi would print them; a
// pid > 0 adds that process, holding every used byte of each device.
func simInfo(infos []acl.DeviceInfo, pid int, proc string) *npusmi.Info {
	in := &npusmi.Info{}
	for _, d := range infos {
		used := (d.HBMUsed + acl.MiB - 1) / acl.MiB // rounded up, as devices --sim prints it
		in.Chips = append(in.Chips, npusmi.Chip{NPU: d.ID, PhyID: -1, Device: -1, Name: d.Name, Health: "OK",
			HBMUsedMB: used, HBMTotalMB: d.HBMTotal / acl.MiB, HBMOK: true})
		if pid > 0 && d.HBMUsed > 0 {
			in.Procs = append(in.Procs, npusmi.Process{NPU: d.ID, PID: pid, Name: proc, MemMB: used})
		}
	}
	return in
}

// npuJSON is the --json shape of one chip. Figures npu-smi printed as NA
// (or a layout lacks) are null; MB columns are converted to bytes (MiB).
type npuJSON struct {
	ID               int            `json:"id"`   // NPU id (npu-smi -i)
	Chip             int            `json:"chip"` // chip index within the NPU
	PhyID            *int           `json:"phy_id"`
	LogicalID        *int           `json:"logical_id"`
	Name             string         `json:"name"`
	Health           string         `json:"health"`
	BusID            string         `json:"bus_id"`
	PowerW           *float64       `json:"power_w"`
	TempC            *int           `json:"temp_c"`
	AICorePct        *int           `json:"aicore_pct"`
	HBMUsedBytes     *int64         `json:"hbm_used_bytes"`
	HBMTotalBytes    *int64         `json:"hbm_total_bytes"`
	MemoryUsedBytes  *int64         `json:"memory_used_bytes"` // the Memory-Usage column (DDR)
	MemoryTotalBytes *int64         `json:"memory_total_bytes"`
	Processes        []procJSON     `json:"processes"`
	UsagesPct        map[string]int `json:"usages_pct,omitempty"`
}

// procJSON is one process on a chip; memory_bytes is its device memory
// (HBM on chips with HBM, DDR on 310B/310P).
type procJSON struct {
	PID         int    `json:"pid"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

func ptr[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

func npuJSONOf(in *npusmi.Info, us []npusmi.Usages) []npuJSON {
	out := make([]npuJSON, 0, len(in.Chips))
	for _, c := range in.Chips {
		j := npuJSON{ID: c.NPU, Chip: c.Chip, PhyID: ptr(c.PhyID, c.PhyID >= 0), LogicalID: ptr(c.Device, c.Device >= 0),
			Name: c.Name, Health: c.Health, BusID: c.BusID,
			PowerW: ptr(c.Power, c.PowerOK), TempC: ptr(c.TempC, c.TempOK), AICorePct: ptr(c.AICore, c.AICoreOK),
			HBMUsedBytes: ptr(c.HBMUsedMB*npusmi.MiB, c.HBMOK), HBMTotalBytes: ptr(c.HBMTotalMB*npusmi.MiB, c.HBMOK),
			MemoryUsedBytes: ptr(c.MemUsedMB*npusmi.MiB, c.MemOK), MemoryTotalBytes: ptr(c.MemTotalMB*npusmi.MiB, c.MemOK),
			Processes: []procJSON{}}
		for _, p := range in.ChipProcs(c) {
			j.Processes = append(j.Processes, procJSON{p.PID, p.Name, p.MemMB * npusmi.MiB})
		}
		for _, u := range us {
			if u.NPU == c.NPU && u.Chip == c.Chip {
				j.UsagesPct = u.Pct
			}
		}
		out = append(out, j)
	}
	return out
}

// writeNPUTable prints the chips and the process table, figures as
// npu-smi prints them (MB = MiB).
func writeNPUTable(w io.Writer, in *npusmi.Info, path string) error {
	title := "npu-smi"
	if in.Version != "" {
		title += " " + in.Version
	}
	fmt.Fprintf(w, "%s (%s)\n", title, path)
	hbm := true
	for _, c := range in.Chips {
		hbm = hbm && c.HBMOK
	}
	memHead := "HBM-Usage(MB)"
	if !hbm {
		memHead = "Memory-Usage(MB)"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "NPU\tChip\tName\tHealth\tPower(W)\tTemp(C)\tAICore(%%)\t%s\n", memHead)
	for _, c := range in.Chips {
		power, temp, aic, mem := "NA", "NA", "NA", "NA"
		if c.PowerOK {
			power = fmt.Sprintf("%.1f", c.Power)
		}
		if c.TempOK {
			temp = fmt.Sprint(c.TempC)
		}
		if c.AICoreOK {
			aic = fmt.Sprint(c.AICore)
		}
		switch {
		case hbm:
			mem = fmt.Sprintf("%d / %d", c.HBMUsedMB, c.HBMTotalMB)
		case c.MemOK:
			mem = fmt.Sprintf("%d / %d", c.MemUsedMB, c.MemTotalMB)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.NPU, c.Chip, c.Name, c.Health, power, temp, aic, mem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(in.Procs) == 0 {
		_, err := fmt.Fprintln(w, "\nNo processes hold device memory.")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NPU\tChip\tPID\tProcess\tMemory(MB)")
	for _, p := range in.Procs {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\n", p.NPU, p.Chip, p.PID, strings.TrimSpace(p.Name), p.MemMB)
	}
	return tw.Flush()
}
