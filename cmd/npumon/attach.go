package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui"
	"github.com/npumon/npumon/tui/rankview"
)

func init() { subcommands = append(subcommands, newAttachCmd) }

// clientExitWait bounds how long attach waits for its connections to wind
// down after the UI ends.
const clientExitWait = 2 * time.Second

// attachWatch, when set (by tests), is handed a single-address attach's
// client and Store as it starts, and a function that ends a headless run
// there (its summary is of the newest data, as at the end of its duration).
// Tests wait on what the client received instead of a guessed duration.
var attachWatch func(client *wire.Client, st *store.Store, endHeadless func())

func newAttachCmd() *cobra.Command {
	var (
		ascii      bool
		headless   time.Duration
		device     int
		mf         metricsFlag
		maxEntries int64
	)
	var smi *npuSMIFlags // set below, read when the command runs
	rf := newRetainFlag()
	c := &cobra.Command{
		Use:   "attach ADDR...",
		Short: "Show a running instrumented process's device memory live",
		Long: "attach connects to a process serving npumon's live wire protocol (an instrumented\n" +
			"training job, or `npumon sim`) and shows its allocator events in the terminal UI as\n" +
			"they happen. ADDR is unix:/path/to.sock, host:port, :port, tcp:host:port, or the pid of\n" +
			"a process serving on its default socket. When the process goes away the header says\n" +
			"\"disconnected\", then \"reconnecting\"; the data seen so far stays, and a restarted\n" +
			"process is picked up again. With --headless DURATION nothing is drawn: it streams for\n" +
			"DURATION and prints the summary at the newest entry as JSON; it exits 1 with the reason\n" +
			"when it never connected or the connection was refused for good.\n" +
			"Several addresses (or a glob of socket paths, e.g. 'unix:/tmp/npumon/*.sock') show the\n" +
			"ranks overview live (docs/ranks.md), one row per process numbered 0… in argument order:\n" +
			"the wire protocol carries no rank.\n\n" +
			"Attaching by pid checks that the socket directory is yours with mode 0700 and that the\n" +
			"process at the other end of the socket is that pid, run by you. What a producer can make\n" +
			"attach hold is bounded (docs/protocol.md, Security): past --max-entries it stops\n" +
			"receiving and keeps what it has.",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%q needs an address", c.CommandPath())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			addrs, err := expandAddrs(args)
			if err != nil {
				return err
			}
			lim := wire.ClientLimits{Entries: maxEntries}
			if len(addrs) > 1 {
				return attachRanks(c.OutOrStdout(), c.ErrOrStderr(), addrs, ascii, headless, &mf, lim, rf.storeOptions())
			}
			a, err := resolveAttachAddr(addrs[0])
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// after the first signal, a second one ends the process at once
			go func() { defer crash.Recover(); <-ctx.Done(); stop() }()
			store := store.New(rf.storeOptions())
			client := wire.NewClient(a.Network, a.Address, store, wire.ClientOptions{ExpectPID: a.PID, Limits: lim})
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			// a client that stops for good (refused peer, limit reached)
			// ends a headless run early
			hctx, hcancel := context.WithCancel(ctx)
			defer hcancel()
			var endHeadless chan struct{}
			if attachWatch != nil {
				endHeadless = make(chan struct{})
				var once sync.Once
				attachWatch(client, store, func() { once.Do(func() { close(endHeadless) }) })
			}
			go func() {
				defer crash.Recover()
				client.Run(cctx)
				close(done)
				if headless > 0 {
					hcancel()
				}
			}()
			defer func() {
				cancel()
				select {
				case <-done:
				case <-time.After(clientExitWait):
				}
			}()
			stopMetrics, err := mf.start(c.ErrOrStderr(), "npumon attach", clientTarget(store, client, a))
			if err != nil {
				return err
			}
			defer stopMetrics()
			name := a.String()
			if a.Network == "unix" { // the header has room for the socket's name, not its directory
				name = "unix:" + filepath.Base(a.Address)
			}
			opts := tui.Options{Source: store, SourceName: name, Live: true, ASCII: ascii, Device: device,
				ConnState: func() (wire.ConnState, string) { return tui.ClientConn(client.Status()) }, Done: endHeadless}
			feed, stopFeed, err := hostDevices(ctx, smi)
			if err != nil {
				return err
			}
			defer stopFeed()
			opts.Devices, opts.ProducerPID = feed, func() int { // the attached process, in npu-smi's table
				if h := client.Status().Hello; h != nil {
					return h.PID
				}
				return 0
			}
			if headless > 0 {
				m, err := tui.RunHeadless(hctx, opts, headless)
				if err != nil && hctx.Err() == nil {
					return err
				}
				st := client.Status()
				if err := writeAttachSummary(c.OutOrStdout(), name, m.Summary(), st, rf.r); err != nil {
					return err
				}
				return attachFailure(addrs[0], st, ctx)
			}
			return tui.Run(ctx, opts)
		},
	}
	smi = addNPUSMIFlags(c)
	f := c.Flags()
	f.IntVar(&device, "device", 0, "device to show first")
	f.BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	f.DurationVar(&headless, "headless", 0, "run without a terminal for this long, then print the summary as JSON")
	f.Int64Var(&maxEntries, "max-entries", wire.DefaultMaxEntries, "hold at most this many trace entries in detail per process (about 100 bytes of memory each); past it attach stops receiving")
	rf.register(f)
	mf.register(f)
	return c
}

// resolveAttachAddr reads an attach address; one given as a pid must be in
// a socket directory that is this user's with mode 0700.
func resolveAttachAddr(s string) (wire.Addr, error) {
	a, err := wire.ResolveAddr(s, -1)
	if err != nil {
		return a, usageError{err}
	}
	if a.PID > 0 {
		if err := wire.CheckSocketDir(filepath.Dir(a.Address), false); err != nil {
			return a, fmt.Errorf("attach %s: %w", s, err)
		}
	}
	return a, nil
}

// attachFailure is a headless attach's exit: an error (exit 1, with the
// reason) when it never connected, or the client stopped for good.
func attachFailure(addr string, st wire.ClientStatus, ctx context.Context) error {
	if ctx.Err() != nil {
		return nil // interrupted: the summary is what was asked for
	}
	reason := "no answer"
	if st.Err != nil {
		reason = st.Err.Error()
	}
	switch {
	case st.Hello == nil:
		return exitError{code: exitFail, msg: fmt.Sprintf("npumon: attach %s: never connected: %s", addr, reason)}
	case st.State == wire.ConnClosed && st.Err != nil:
		return exitError{code: exitFail, msg: fmt.Sprintf("npumon: attach %s: stopped: %s", addr, reason)}
	}
	return nil
}

// attachSummaryJSON is replay's summary plus the connection's state.
type attachSummaryJSON struct {
	replaySummaryJSON
	Connection    string `json:"connection"`
	ProducerPID   int    `json:"producer_pid,omitempty"`
	Received      uint64 `json:"received_entries"`
	MissedEntries uint64 `json:"missed_entries"`
	// Gaps counts the producer's GAP records, those of unknown size too
	// (a ring buffer that wrapped between two polls); Resyncs the fresh
	// snapshots that followed. TimeResolutionUS is set when the producer
	// stamps entries with its poll time: they happened up to that long
	// before their time.
	Gaps             int   `json:"gaps,omitempty"`
	Resyncs          int   `json:"resyncs,omitempty"`
	TimeResolutionUS int64 `json:"time_resolution_us,omitempty"`
	// Error is why the last connection ended or failed (while retrying
	// after a connection that was up: why it ended, then the retry's error).
	Error string `json:"error,omitempty"`
}

func writeAttachSummary(w io.Writer, name string, s store.Summary, st wire.ClientStatus, ret store.Retention) error {
	out := attachSummaryJSON{replaySummaryJSON: replaySummary(name, s, summaryAttach), Connection: st.State.String(),
		Received: st.Entries, MissedEntries: st.Missed}
	withRetention(&out.replaySummaryJSON, s, ret)
	out.Gaps, out.Resyncs = st.Gaps, st.Resyncs
	if st.Err != nil {
		out.Error = st.Err.Error()
	}
	if st.Hello != nil {
		out.ProducerPID = st.Hello.PID
		if st.Hello.TimeBase == store.TimePollUS {
			out.TimeResolutionUS = st.Hello.Resolution.Microseconds()
		}
		producerPeaks(&out.replaySummaryJSON, s.Device, st.Hello.Peaks)
	}
	return writeJSON(w, out)
}

// expandAddrs expands glob patterns among unix socket addresses (sorted),
// keeping other addresses as they are.
func expandAddrs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		p := strings.TrimPrefix(a, "unix:")
		if !strings.ContainsAny(p, "*?[") {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", a, err)}
		}
		if len(m) == 0 {
			return nil, usageError{fmt.Errorf("%s: no socket matches", a)}
		}
		for _, s := range m {
			out = append(out, "unix:"+s)
		}
	}
	return out, nil
}

// attachRanks attaches to several producers and shows them in the ranks
// overview, numbered in argument order.
func attachRanks(out, errOut io.Writer, addrs []string, ascii bool, headless time.Duration, mf *metricsFlag, lim wire.ClientLimits, so store.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { defer crash.Recover(); <-ctx.Done(); stop() }() // a second signal ends the process at once
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		done := make(chan struct{})
		go func() { defer crash.Recover(); wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(clientExitWait):
		}
	}()
	var rs []rankview.Rank
	var targets []metrics.Target
	for i, a := range addrs {
		ad, err := resolveAttachAddr(a)
		if err != nil {
			return err
		}
		store := store.New(so)
		client := wire.NewClient(ad.Network, ad.Address, store, wire.ClientOptions{ExpectPID: ad.PID, Limits: lim})
		wg.Add(1)
		go func() { defer crash.Recover(); defer wg.Done(); client.Run(cctx) }()
		name := ad.String()
		if ad.Network == "unix" {
			name = "unix:" + filepath.Base(ad.Address)
		}
		rs = append(rs, rankview.Rank{Rank: i, Name: name, Store: store})
		t := clientTarget(store, client, ad)
		t.Name = a
		targets = append(targets, t)
	}
	stopMetrics, err := mf.start(errOut, "npumon attach", targets...)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if headless > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(headless):
		}
		return writeRanksSummary(out, strings.Join(addrs, " "), rs)
	}
	return rankview.Run(ctx, rankview.Options{Title: fmt.Sprintf("%d processes", len(addrs)), Ranks: rs, Live: true, ASCII: ascii, Open: openRank(nil)})
}

// producerPeaks takes the producer's own peaks (sent in its HELLO) for the
// device: the peaks then cover the whole process ("process"), not only what
// happened since attach. A peak from the HELLO has no entry time.
func producerPeaks(out *replaySummaryJSON, device int, peaks []wire.DevicePeak) {
	for _, p := range peaks {
		if p.Device != device {
			continue
		}
		if p.ActiveBytes > out.PeakActiveBytes {
			out.PeakActiveBytes, out.PeakActiveTime = p.ActiveBytes, nil
		}
		out.PeakReservedBytes = max(out.PeakReservedBytes, p.ReservedBytes)
		out.PeakScope = "process"
	}
}
