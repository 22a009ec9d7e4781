package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/tui"
)

func init() { subcommands = append(subcommands, newAttachCmd) }

func newAttachCmd() *cobra.Command {
	var (
		ascii    bool
		headless time.Duration
		device   int
	)
	var smi *npuSMIFlags // set below, read when the command runs
	c := &cobra.Command{
		Use:   "attach ADDR",
		Short: "Show a running instrumented process's device memory live",
		Long: "attach connects to a process serving npumon's live wire protocol (an instrumented\n" +
			"training job, or `npumon sim`) and shows its allocator events in the terminal UI as\n" +
			"they happen. ADDR is unix:/path/to.sock, host:port, :port, tcp:host:port, or the pid of\n" +
			"a process serving on its default socket. When the process goes away the header says\n" +
			"\"disconnected\", then \"reconnecting\"; the data seen so far stays, and a restarted\n" +
			"process is picked up again. With --headless DURATION nothing is drawn: it streams for\n" +
			"DURATION and prints the summary at the newest entry as JSON.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			network, addr, err := monitor.ParseAddr(args[0], -1)
			if err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			store := monitor.NewStore(monitor.StoreOptions{})
			client := monitor.NewClient(network, addr, store, monitor.ClientOptions{})
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { client.Run(cctx); close(done) }()
			defer func() { cancel(); <-done }()
			name := network + ":" + addr
			if network == "unix" { // the header has room for the socket's name, not its directory
				name = "unix:" + filepath.Base(addr)
			}
			opts := tui.Options{Source: store, SourceName: name, Live: true, ASCII: ascii, Device: device,
				ConnState: func() (tui.ConnState, string) { return tui.ClientConn(client.Status()) }}
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
				m, err := tui.RunHeadless(ctx, opts, headless)
				if err != nil {
					return err
				}
				return writeAttachSummary(c.OutOrStdout(), name, m.Summary(), client.Status())
			}
			return tui.Run(ctx, opts)
		},
	}
	smi = addNPUSMIFlags(c)
	f := c.Flags()
	f.IntVar(&device, "device", 0, "device to show first")
	f.BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	f.DurationVar(&headless, "headless", 0, "run without a terminal for this long, then print the summary as JSON")
	return c
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
}

func writeAttachSummary(w io.Writer, name string, s monitor.Summary, st monitor.ClientStatus) error {
	out := attachSummaryJSON{replaySummaryJSON: replaySummary(name, s), Connection: st.State.String(),
		Received: st.Entries, MissedEntries: st.Missed}
	out.Gaps, out.Resyncs = st.Gaps, st.Resyncs
	if st.Hello != nil {
		out.ProducerPID = st.Hello.PID
		if st.Hello.TimeBase == monitor.TimePollUS {
			out.TimeResolutionUS = st.Hello.Resolution.Microseconds()
		}
	}
	return writeJSON(w, out)
}
