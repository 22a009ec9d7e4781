package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/devpoll"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/npusmi"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/tui"
)

// demoWatch, when set (by tests), is handed a single-rank demo's store and
// a function that ends a headless run at once, as the job's end does: a test
// ends the run when what it waits for is in the store, not after a guessed
// time.
var demoWatch func(st *store.Store, endHeadless func())

func init() { subcommands = append(subcommands, newDemoCmd) }

func newDemoCmd() *cobra.Command {
	var (
		wf       workloadFlags
		ascii    bool
		headless time.Duration
		mf       metricsFlag
		nRanks   int
	)
	rf := newRetainFlag()
	c := &cobra.Command{
		Use:   "demo",
		Short: "Watch a simulated training job's device memory live (no NPU needed)",
		Long: "demo runs a simulated training job in-process — a transformer on a simulated Ascend\n" +
			"device, through npumon's caching allocator and profiler — and shows it live in the\n" +
			"terminal UI. Scenarios: steady, fragmentation, leak, oom. With --out DIR it also writes\n" +
			"what real jobs write: snapshot pickles every N steps and on OOM, and profiler\n" +
			"directories. With --headless DURATION nothing is drawn: the job runs for DURATION and\n" +
			"the summary at the newest entry is printed as JSON. --ranks N runs N ranks of one job, each\n" +
			"with its own device, rank r holding ⌈r/2⌉ more layers than rank 0, and shows the ranks overview.",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := wf.config()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if c.Flags().Changed("ranks") {
				return demoRanks(ctx, c.OutOrStdout(), c.ErrOrStderr(), cfg, nRanks, ascii, headless, &mf, rf.storeOptions())
			}
			st := store.New(rf.storeOptions())
			cfg.OnOp = store.NewOpBatcher(st.AppendOps).Add
			cfg.Logf = func(string, ...any) {} // the UI shows OOMs; keep the terminal clean
			w, err := workload.New(cfg)
			if err != nil {
				return usageError{err}
			}
			detach, err := attach.Store(st, []*allocator.Allocator{w.Allocator()},
				attach.Options{Devices: func() []store.DeviceInfo { return []store.DeviceInfo{w.DeviceInfo()} }})
			if err != nil {
				return err
			}
			stopMetrics, err := mf.start(c.ErrOrStderr(), "npumon demo", metrics.Target{Store: st, Rank: -1, Source: "demo",
				PID: w.Config().PID, Allocator: func(int) *allocator.Allocator { return w.Allocator() }})
			if err != nil {
				detach()
				return err
			}
			defer stopMetrics()
			wctx, cancel := context.WithCancel(ctx)
			done, ended := make(chan error, 1), make(chan struct{})
			go func() {
				defer crash.Recover()
				err := w.Run(wctx)
				detach() // flushes what the allocators recorded into the store
				close(ended)
				done <- err
			}()
			name := fmt.Sprintf("demo · %s · pid %d", cfg.Scenario, w.Config().PID)
			opts := tui.Options{Source: st, SourceName: name, Live: true, ASCII: ascii, Done: ended}
			if demoWatch != nil {
				end := make(chan struct{})
				var once sync.Once
				stopHeadless := func() { once.Do(func() { close(end) }) }
				go func() { defer crash.Recover(); <-ended; stopHeadless() }()
				demoWatch(st, stopHeadless)
				opts.Done = end
			}
			// the devices view shows the simulated device, the demo its process
			pid := w.Config().PID
			feed := devpoll.NewFuncAt("simulated device", time.Second, func() (*npusmi.Info, time.Time) {
				info, at := simReading(w)
				return simInfo([]acl.DeviceInfo{info}, pid, "npumon demo"), at
			})
			stopFeed := runFeed(ctx, feed)
			defer stopFeed()
			opts.Devices, opts.ProducerPID = feed, func() int { return pid }
			var m *tui.Model
			if headless > 0 {
				m, err = tui.RunHeadless(ctx, opts, headless)
			} else {
				err = tui.Run(ctx, opts)
			}
			cancel()
			werr := <-done
			if err != nil {
				return err
			}
			if werr != nil && !isStopped(werr) {
				return werr
			}
			if m != nil {
				out := replaySummary(name, m.Summary(), summaryTrace)
				withRetention(&out, m.Summary(), rf.r)
				return writeJSON(c.OutOrStdout(), out)
			}
			return nil
		},
	}
	wf.register(c.Flags())
	c.Flags().BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	c.Flags().DurationVar(&headless, "headless", 0, "run without a terminal for this long, then print the summary as JSON")
	mf.register(c.Flags())
	rf.register(c.Flags())
	c.Flags().IntVar(&nRanks, "ranks", 0, "run N ranks side by side (rank r holds ⌈r/2⌉ layers more than its device was sized for: a deliberate skew) and show the ranks overview; with --out each writes to DIR/rank{r}")
	return c
}

// simReading reads the simulated device with the moment of the reading on
// the job's own clock (the clock its trace entries are stamped by), so the
// devices view pairs it with the allocator's state at that moment: a
// reading is taken again (a few times at most) when the clock moved while
// it was read, i.e. the job was inside an allocator call.
func simReading(w *workload.Workload) (acl.DeviceInfo, time.Time) {
	var info acl.DeviceInfo
	var at time.Time
	for range 8 {
		at = w.Now()
		info = w.Device().Info()
		if w.Now().Equal(at) {
			break
		}
	}
	return info, at
}

// isStopped reports whether err is the end of a run under --on-oom stop
// (shown in the UI, not an error of the command).
func isStopped(err error) bool { return errors.Is(err, workload.ErrStopped) }

// workloadFlags are the options demo and sim share.
type workloadFlags struct {
	scenario      string
	seed          uint64
	rate          float64
	layers        int
	deviceMem     string
	onOOM         string
	out           string
	snapshotEvery int
	steps         int
	allocConf     string
	noProfiler    bool
}

func (wf *workloadFlags) register(f *pflag.FlagSet) {
	names := make([]string, len(workload.Scenarios))
	for i, s := range workload.Scenarios {
		names[i] = string(s)
	}
	f.StringVar(&wf.scenario, "scenario", string(workload.Steady), "memory pattern: "+strings.Join(names, ", "))
	f.Uint64Var(&wf.seed, "seed", 1, "random seed (the same seed gives the same run)")
	f.Float64Var(&wf.rate, "rate", 2, "training steps per second")
	f.IntVar(&wf.layers, "layers", 8, "transformer layers of the simulated model (the model is sized to the device)")
	f.StringVar(&wf.deviceMem, "device-mem", "64GiB", "HBM of the simulated device (e.g. 16GiB, 512MiB)")
	f.StringVar(&wf.onOOM, "on-oom", string(workload.Recover), "after an out-of-memory error: recover (free, empty_cache, go on) or stop")
	f.StringVar(&wf.out, "out", "", "write snapshot pickles and profiler directories here")
	f.IntVar(&wf.snapshotEvery, "snapshot-every", 10, "with --out: a snapshot pickle every N steps (0: only on OOM)")
	f.IntVar(&wf.steps, "steps", 0, "stop the job after N steps (0: run until interrupted)")
	f.BoolVar(&wf.noProfiler, "no-profiler", false, "run the job without a profiler: with --out, no profiler directories and no ProfilerStep#N ranges in the snapshots")
	f.StringVar(&wf.allocConf, "alloc-conf", "", "allocator settings (PYTORCH_NPU_ALLOC_CONF syntax; default: $PYTORCH_NPU_ALLOC_CONF or its alias $PYTORCH_ALLOC_CONF)")
}

// config turns the flags into a paced workload configuration.
func (wf *workloadFlags) config() (workload.Config, error) {
	if wf.allocConf == "" {
		conf, _, err := config.EnvConf(os.LookupEnv)
		if err != nil {
			return workload.Config{}, usageError{err}
		}
		wf.allocConf = conf
	}
	sc, err := workload.ParseScenario(wf.scenario)
	if err != nil {
		return workload.Config{}, usageError{err}
	}
	if wf.rate <= 0 || wf.rate > 1000 {
		return workload.Config{}, usageError{fmt.Errorf("--rate must be in (0, 1000] steps per second, got %v", wf.rate)}
	}
	mem, err := bytesize.Parse(wf.deviceMem)
	if err == nil && (mem <= 0 || mem > 1<<50) {
		err = fmt.Errorf("%q: want more than 0 and at most 1 PiB", wf.deviceMem)
	}
	if err != nil {
		return workload.Config{}, usageError{fmt.Errorf("--device-mem: %w", err)}
	}
	if wf.onOOM != string(workload.Recover) && wf.onOOM != string(workload.Stop) {
		return workload.Config{}, usageError{fmt.Errorf("--on-oom must be recover or stop, got %q", wf.onOOM)}
	}
	if wf.steps < 0 || wf.snapshotEvery < 0 || wf.layers <= 0 {
		return workload.Config{}, usageError{fmt.Errorf("--steps, --snapshot-every and --layers must not be negative (--layers > 0)")}
	}
	every := wf.snapshotEvery
	if every == 0 {
		every = -1 // the workload's "only on OOM"
	}
	return workload.Config{Scenario: sc, Seed: wf.seed, Rate: wf.rate, Layers: wf.layers, DeviceMem: mem,
		OnOOM: workload.OOMPolicy(wf.onOOM), Out: wf.out, SnapshotEvery: every, Steps: wf.steps,
		AllocConf: wf.allocConf, Paced: true, NoProfiler: wf.noProfiler}, nil
}
