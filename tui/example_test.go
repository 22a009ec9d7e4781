package tui_test

import (
	"context"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/tui"
)

// A live source: the Store is fed by another goroutine (a wire client, an
// in-process tracker); the app follows it and shows the connection state.
func Example_live() {
	store := monitor.NewStore(monitor.StoreOptions{})
	_ = store.StartLive(nil, []monitor.DeviceInfo{{ID: 0, Name: "Ascend910B3", HBMTotal: 64 << 30}})
	go func() {
		for t := time.Now().UnixMicro(); ; t += 1000 {
			store.Append(0, []allocator.TraceEntry{{Action: allocator.ActionAlloc, Addr: 0x1000, Size: 512, TimeUS: t}})
			time.Sleep(time.Millisecond)
		}
	}()
	p := tui.NewProgram(tui.Options{Source: store, SourceName: "pid 4242 @ unix:/tmp/npumon.sock", Live: true,
		ConnState: func() (tui.ConnState, string) { return tui.ConnConnected, "unix:/tmp/npumon.sock" }})
	_, _ = p.Run()
}

// A file: Load decodes it into the Store off the UI goroutine while the
// screen shows progress.
func Example_replay() {
	store := monitor.NewStore(monitor.StoreOptions{})
	_ = tui.Run(context.Background(), tui.Options{
		Source:     store,
		SourceName: "snapshot.pickle",
		Load: func(ctx context.Context, report func(tui.Progress)) error {
			report(tui.Progress{Stage: "decoding"})
			return store.IngestSnapshot(&allocator.Snapshot{})
		},
	})
}
