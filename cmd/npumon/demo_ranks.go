package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/tui/rankview"
)

// rankExtraLayers is the deliberate skew of demo --ranks: every rank's
// model is sized for its device with --layers, then rank r holds r/2 more
// layers rounded up (uneven pipeline stages: 0, 1, 1, 2, 2, …), so its
// parameters, optimizer state and activations — and its peaks — grow with
// r, and rank 1 already differs from rank 0 at --ranks 2.
func rankExtraLayers(r int) int { return (r + 1) / 2 }

// demoRanks runs n simulated ranks side by side, each on its own device
// with its own allocator, and shows the ranks overview live. With --out DIR
// rank r writes to DIR/rank{r}.
func demoRanks(ctx context.Context, out, errOut io.Writer, base workload.Config, n int, ascii bool, headless time.Duration,
	mf *metricsFlag, so store.Options) error {
	if n < 2 || n > 64 {
		return usageError{fmt.Errorf("--ranks must be in [2, 64], got %d", n)}
	}
	var (
		rs      []rankview.Rank
		ws      []*workload.Workload
		targets []metrics.Target
	)
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	for r := range n {
		cfg := base
		cfg.ExtraLayers = rankExtraLayers(r)
		cfg.Seed = base.Seed + uint64(r)
		cfg.Logf = func(string, ...any) {}
		if base.Out != "" {
			cfg.Out = filepath.Join(base.Out, fmt.Sprintf("rank%d", r))
			if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
				return err
			}
		}
		st := store.New(so)
		cfg.OnOp = store.NewOpBatcher(st.AppendOps).Add
		w, err := workload.New(cfg)
		if err != nil {
			return usageError{err}
		}
		ws = append(ws, w)
		detach, err := attach.Store(st, []*allocator.Allocator{w.Allocator()},
			attach.Options{Devices: func() []store.DeviceInfo { return []store.DeviceInfo{w.DeviceInfo()} }})
		if err != nil {
			return err
		}
		defer detach()
		rs = append(rs, rankview.Rank{Rank: r, Name: fmt.Sprintf("%s +%dL", cfg.Scenario, cfg.ExtraLayers), Store: st})
		targets = append(targets, metrics.Target{Store: st, Rank: r, PID: w.Config().PID, Source: "demo",
			Allocator: func(int) *allocator.Allocator { return w.Allocator() }})
	}
	stopMetrics, err := mf.start(errOut, "npumon demo", targets...)
	if err != nil {
		return err
	}
	defer stopMetrics()
	wctx, cancel := context.WithCancel(ctx)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer crash.Recover(); defer wg.Done(); errs[i] = w.Run(wctx) }()
	}
	allDone := make(chan struct{})
	go func() { defer crash.Recover(); wg.Wait(); close(allDone) }()
	var uiErr error
	if headless > 0 {
		// as demo --headless: the summary comes when every job has ended
		// (--steps), or after the duration
		select {
		case <-ctx.Done():
		case <-allDone:
		case <-time.After(headless):
		}
	} else {
		uiErr = rankview.Run(ctx, rankview.Options{Title: fmt.Sprintf("demo · pid %d", os.Getpid()), Ranks: rs, Live: true, ASCII: ascii, Open: openRank(nil)})
	}
	stopped := wctx.Err() != nil || ctx.Err() != nil
	cancel()
	<-allDone
	var werr error
	for _, err := range errs {
		if err != nil && !isStopped(err) && !stopped && werr == nil && !errors.Is(err, context.Canceled) {
			werr = err
		}
	}
	if uiErr != nil {
		return uiErr
	}
	if werr != nil {
		return werr
	}
	if headless > 0 {
		return writeRanksSummary(out, fmt.Sprintf("demo · %d ranks", n), rs)
	}
	return nil
}
