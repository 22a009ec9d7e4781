package tui_test

import (
	"context"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui"
)

// A live source: the Store is fed by another goroutine (a wire client, an
// in-process tracker); the app follows it and shows the connection state.
func Example_live() {
	st := store.New(store.Options{})
	_ = st.StartLive(nil, []store.DeviceInfo{{ID: 0, Name: "Ascend910B3", HBMTotal: 64 << 30}})
	go func() {
		for t := time.Now().UnixMicro(); ; t += 1000 {
			st.Append(0, []snapshot.TraceEntry{{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 512, TimeUS: t}})
			time.Sleep(time.Millisecond)
		}
	}()
	p := tui.NewProgram(tui.Options{Source: st, SourceName: "pid 4242 @ unix:/tmp/npumon.sock", Live: true,
		ConnState: func() (wire.ConnState, string) { return wire.ConnConnected, "unix:/tmp/npumon.sock" }})
	_, _ = p.Run()
}

// A file: Load decodes it into the Store off the UI goroutine while the
// screen shows progress.
func Example_replay() {
	st := store.New(store.Options{})
	_ = tui.Run(context.Background(), tui.Options{
		Source:     st,
		SourceName: "snapshot.pickle",
		Load: func(ctx context.Context, report func(tui.Progress)) error {
			report(tui.Progress{Stage: "decoding"})
			return st.IngestSnapshot(&snapshot.Snapshot{})
		},
	})
}
