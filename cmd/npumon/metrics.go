package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/monitor/metrics"
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
			"reach is allowed and printed with a warning. Each SOURCE's series carry its pid when the\n" +
			"source names one.",
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
		store := monitor.NewStore(monitor.StoreOptions{})
		wd := monitor.NewDirSource(src, store, monitor.DirOptions{Follow: true})
		if err := wd.Start(ctx); err != nil {
			return nil, nil, err
		}
		return []metrics.Target{{Store: store, Rank: -1}}, wd.Stop, nil
	}
	network, addr, err := monitor.ParseAddr(src, -1)
	if err != nil {
		return nil, nil, usageError{err}
	}
	store := monitor.NewStore(monitor.StoreOptions{})
	client := monitor.NewClient(network, addr, store, monitor.ClientOptions{})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { client.Run(cctx); close(done) }()
	return []metrics.Target{clientTarget(store, client)}, func() { cancel(); <-done }, nil
}

// clientTarget is a live connection's metrics target: the producer's pid
// from its handshake, the connection's received and missed counts.
func clientTarget(store *monitor.Store, client *monitor.Client) metrics.Target {
	return metrics.Target{Store: store, Rank: -1,
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
