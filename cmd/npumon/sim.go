package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/monitor/workload"
)

func init() { subcommands = append(subcommands, newSimCmd) }

func newSimCmd() *cobra.Command {
	var (
		wf     workloadFlags
		listen string
		mf     metricsFlag
	)
	c := &cobra.Command{
		Use:   "sim",
		Short: "Run the simulated training job headless, serving its memory events live",
		Long: "sim runs the demo's simulated training job without a UI and serves its allocator\n" +
			"events over npumon's live wire protocol (docs/protocol.md), as an instrumented process\n" +
			"would: attach to it with `npumon attach ADDR`. It prints where it listens, one line per\n" +
			"notable event (OOM, files written) on stderr, and — when the job ends (--steps) or is\n" +
			"interrupted — a JSON summary of the allocator's totals. After --steps it keeps serving\n" +
			"until interrupted.\n\n" +
			"ADDR is unix:/path/to.sock, host:port, :port (loopback) or tcp:host:port; the default is\n" +
			"a Unix socket named after the pid (npumon attach PID finds it).",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := wf.config()
			if err != nil {
				return err
			}
			network, addr, err := wire.ParseAddr(listen, os.Getpid())
			if err != nil {
				return usageError{fmt.Errorf("--listen: %w", err)}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			stderr := c.ErrOrStderr()
			cfg.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, "npumon sim: "+f+"\n", a...) }
			var srv *wire.Server
			feed := store.NewOpBatcher(func(ops []store.Op) { srv.PublishOps(ops) })
			cfg.OnOp = feed.Add
			w, err := workload.New(cfg)
			if err != nil {
				return usageError{err}
			}
			srv, stopServer, err := attach.Serve(network, addr, []*allocator.Allocator{w.Allocator()},
				wire.ServerOptions{Devices: func() []store.DeviceInfo { return []store.DeviceInfo{w.DeviceInfo()} }, Logf: cfg.Logf})
			if err != nil {
				w.Close()
				return err
			}
			defer stopServer()
			out := c.OutOrStdout()
			fmt.Fprintf(out, "npumon sim: pid %d serving on %s:%s (scenario %s; %s on %s)\n", os.Getpid(), network,
				srv.Addr(), cfg.Scenario, w.Shape(), bytesize.Torch(cfg.DeviceMem))
			stopMetrics, err := simMetrics(&mf, out, w)
			if err != nil {
				w.Close()
				return err
			}
			defer stopMetrics()
			if cfg.Out != "" {
				abs, _ := filepath.Abs(cfg.Out)
				fmt.Fprintf(out, "npumon sim: writing snapshots and profiler directories to %s\n", abs)
			}
			if f, ok := out.(interface{ Sync() error }); ok {
				f.Sync()
			}
			runErr := w.Run(ctx)
			feed.Flush()
			if runErr != nil && !isStopped(runErr) {
				return runErr
			}
			if runErr != nil {
				fmt.Fprintf(stderr, "npumon sim: %v\n", firstLine(runErr.Error()))
			}
			if err := writeSimSummary(out, w, srv); err != nil {
				return err
			}
			<-ctx.Done() // keep serving the final state until interrupted
			return nil
		},
	}
	wf.register(c.Flags())
	c.Flags().StringVar(&listen, "listen", "", "address to serve on (default: unix socket named after the pid)")
	mf.register(c.Flags())
	return c
}

// simSummaryJSON is sim's final line: the allocator's totals, which an
// attached npumon shows at its newest entry.
type simSummaryJSON struct {
	PID            int   `json:"pid"`
	Steps          int   `json:"steps"`
	Published      int64 `json:"published_entries"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	ActiveBytes    int64 `json:"active_bytes"`
	RequestedBytes int64 `json:"requested_bytes"` // what npumon's active series counts (docs/timeline.md)
	Segments       int64 `json:"segments"`
	PeakActive     int64 `json:"peak_active_bytes"`
	OOMs           int64 `json:"ooms"`
}

func writeSimSummary(w io.Writer, wl *workload.Workload, srv *wire.Server) error {
	s := wl.Allocator().Stats()
	all := allocator.StatAll
	return json.NewEncoder(w).Encode(simSummaryJSON{PID: os.Getpid(), Steps: wl.StepNum(), Published: int64(srv.Published(0)),
		AllocatedBytes: s.AllocatedBytes[all].Current, ReservedBytes: s.ReservedBytes[all].Current,
		ActiveBytes: s.ActiveBytes[all].Current, RequestedBytes: s.RequestedBytes[all].Current, Segments: s.Segment[all].Current, PeakActive: s.ActiveBytes[all].Peak,
		OOMs: s.NumOOMs})
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// simMetrics serves --metrics for sim: a Store fed by the job's allocator
// (as demo's), with the allocator's own counters beside it.
func simMetrics(mf *metricsFlag, out io.Writer, w *workload.Workload) (stop func(), err error) {
	if mf.addr == "" {
		return func() {}, nil
	}
	st := store.New(store.Options{Retain: store.DefaultRetention}) // a live Store: bounded
	detach, err := attach.Store(st, []*allocator.Allocator{w.Allocator()},
		attach.Options{Devices: func() []store.DeviceInfo { return []store.DeviceInfo{w.DeviceInfo()} }})
	if err != nil {
		return nil, err
	}
	stopMetrics, err := mf.start(out, "npumon sim", metrics.Target{Store: st, Rank: -1, PID: os.Getpid(), Source: "sim",
		Allocator: func(int) *allocator.Allocator { return w.Allocator() }})
	if err != nil {
		detach()
		return nil, err
	}
	return func() { stopMetrics(); detach() }, nil
}
