package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui"
)

// metricsFlag is --metrics ADDR, which sim, attach, watch and demo share.
type metricsFlag struct{ addr string }

func (m *metricsFlag) register(f *pflag.FlagSet) {
	f.StringVar(&m.addr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port; :port is loopback; docs/metrics.md)")
}

// start serves the targets' metrics when --metrics was given; stop is then
// the server's Close (a no-op otherwise). It says where it listens on w,
// and warns there when the address is reachable from other hosts.
func (m *metricsFlag) start(w io.Writer, prefix string, targets ...metrics.Target) (stop func(), err error) {
	if m.addr == "" {
		return func() {}, nil
	}
	return serveMetrics(w, prefix, m.addr, targets...)
}

func serveMetrics(w io.Writer, prefix, addr string, targets ...metrics.Target) (stop func(), err error) {
	if err := metrics.Distinct(targets); err != nil {
		return nil, err
	}
	resolved, exposed, err := metrics.ListenAddr(addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--metrics: %w", err)}
	}
	srv, err := metrics.Serve(resolved, metrics.New(targets...))
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	// the host asked for (0.0.0.0 stays 0.0.0.0), the port given
	host, _, _ := net.SplitHostPort(resolved)
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	at := net.JoinHostPort(host, port)
	if exposed {
		fmt.Fprintf(w, "%s: warning: metrics on %s are reachable from other hosts, without authentication\n", prefix, at)
	}
	fmt.Fprintf(w, "%s: metrics on http://%s/metrics\n", prefix, at)
	return func() { srv.Close() }, nil
}

func init() { subcommands = append(subcommands, newExporterCmd) }

func newExporterCmd() *cobra.Command {
	var listen string
	c := &cobra.Command{
		Use:   "exporter [--metrics ADDR] SOURCE...",
		Short: "Serve Prometheus metrics for live processes and watched directories, without a UI",
		Long: "exporter attaches to each SOURCE as `npumon attach` and `npumon watch` would — a live\n" +
			"address (unix:/path, host:port, :port, tcp:host:port or a pid) or a directory where a job\n" +
			"dumps snapshots — and serves their figures at http://ADDR/metrics for Prometheus until\n" +
			"interrupted (docs/metrics.md). ADDR defaults to 127.0.0.1:9464; an address other hosts can\n" +
			"reach is allowed and printed with a warning. Each SOURCE's series carry it as their source\n" +
			"label (a directory's absolute path, a resolved address) and its pid when the source names\n" +
			"one; a directory holding several ranks (docs/ranks.md) gives one set of series per rank,\n" +
			"with its rank label. One source named twice (dumps and ./dumps/) is refused at start.",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%q needs at least one SOURCE", c.CommandPath())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var targets []metrics.Target
			var closers []func()
			defer func() {
				for _, f := range closers {
					f()
				}
			}()
			out := c.OutOrStdout()
			for _, src := range args {
				ts, closer, err := exporterSource(ctx, src)
				if err != nil {
					return err
				}
				closers = append(closers, closer)
				targets = append(targets, ts...)
				fmt.Fprintf(out, "npumon exporter: source %s\n", src)
			}
			stopMetrics, err := serveMetrics(out, "npumon exporter", listen, targets...)
			if err != nil {
				return err
			}
			defer stopMetrics()
			if f, ok := out.(interface{ Sync() error }); ok {
				f.Sync()
			}
			<-ctx.Done()
			return nil
		},
	}
	c.Flags().StringVar(&listen, "metrics", "127.0.0.1:9464", "serve Prometheus metrics at http://ADDR/metrics (host:port; :port is loopback)")
	return c
}

// exporterSource starts feeding a Store from one SOURCE: a directory is
// watched (following new captures), anything else is a live address.
func exporterSource(ctx context.Context, src string) ([]metrics.Target, func(), error) {
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		members, err := jobdir.Find(src)
		if err != nil {
			return nil, nil, err
		}
		if members != nil {
			return exporterRanks(ctx, src, members)
		}
		store := store.New(store.Options{Retain: store.DefaultRetention}) // live: bounded
		wd := watch.NewDirSource(src, store, watch.DirOptions{Follow: true})
		if err := wd.Start(ctx); err != nil {
			return nil, nil, err
		}
		return []metrics.Target{{Store: store, Rank: -1, Source: dirSource(src), Name: src}}, wd.Stop, nil
	}
	ad, err := wire.ResolveAddr(src, -1)
	if err != nil {
		return nil, nil, usageError{err}
	}
	store := store.New(store.Options{Retain: store.DefaultRetention}) // live: bounded
	client := wire.NewClient(ad.Network, ad.Address, store, wire.ClientOptions{})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer crash.Recover(); client.Run(cctx); close(done) }()
	t := clientTarget(store, client, ad)
	t.Name = src
	return []metrics.Target{t}, func() { cancel(); <-done }, nil
}

// exporterRanks feeds one Store per rank of a job directory: a rank
// directory is watched, a rank's file or profiler directory read once (in
// the background; its series appear when it is loaded).
func exporterRanks(ctx context.Context, dir string, members []jobdir.Member) ([]metrics.Target, func(), error) {
	rs := ranksFromMembers(members)
	var stops []func()
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var targets []metrics.Target
	for i, m := range members {
		if rdir := filepath.Dir(m.Path); filepath.Clean(rdir) != filepath.Clean(dir) && m.Kind == capture.Snapshot {
			wd := watch.NewDirSource(rdir, rs[i].Store, watch.DirOptions{Follow: true})
			if err := wd.Start(cctx); err != nil {
				cancel()
				for _, f := range stops {
					f()
				}
				return nil, nil, err
			}
			stops = append(stops, wd.Stop)
		} else {
			load := rs[i].Load
			wg.Add(1)
			go func() {
				defer crash.Recover()
				defer wg.Done()
				if err := load(cctx, func(tui.Progress) {}); err != nil && cctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "npumon exporter: %v\n", err)
				}
			}()
		}
		targets = append(targets, metrics.Target{Store: rs[i].Store, Rank: m.Rank, Source: dirSource(dir), Name: dir})
	}
	return targets, func() {
		cancel()
		wg.Wait()
		for _, f := range stops {
			f()
		}
	}, nil
}

// dirSource is a directory's source label: its absolute path, so that
// one directory named twice (dumps, ./dumps/) is one label value.
func dirSource(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// addrSource is a live address's source label: the resolved address
// (network:address), a socket path made absolute; a pid names its
// default socket, so the pid and that socket's path are one source.
func addrSource(a wire.Addr) string {
	if a.Network == "unix" {
		return "unix:" + dirSource(a.Address)
	}
	return a.String()
}

// clientTarget is a live connection's metrics target: the producer's pid
// from its handshake, the connection's received and missed counts, the
// address as its source label.
func clientTarget(store *store.Store, client *wire.Client, a wire.Addr) metrics.Target {
	return metrics.Target{Store: store, Rank: -1, Source: addrSource(a), Name: a.String(),
		PIDFun: func() int {
			if h := client.Status().Hello; h != nil {
				return h.PID
			}
			return 0
		},
		Received: func() (uint64, uint64) {
			st := client.Status()
			return st.Entries, st.Missed
		}}
}
