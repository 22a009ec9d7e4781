package main

import (
	"github.com/npumon/npumon/monitor/store"
	"github.com/spf13/pflag"
)

// retainFlag is --retain: how much of a live session is kept in full
// detail (docs/retention.md).
type retainFlag struct{ r store.Retention }

func newRetainFlag() *retainFlag { return &retainFlag{r: store.DefaultRetention} }

func (f *retainFlag) String() string { return f.r.String() }
func (f *retainFlag) Type() string   { return "entries|duration|all" }
func (f *retainFlag) Set(v string) error {
	r, err := store.ParseRetention(v)
	if err != nil {
		return err
	}
	f.r = r
	return nil
}

func (f *retainFlag) register(fs *pflag.FlagSet) {
	fs.Var(f, "retain", "full detail for the newest N entries per device, or the last DURATION (e.g. 30m), or all; older detail is thinned, the series and peaks stay (docs/retention.md)")
}

// storeOptions are a live Store's options under the flag.
func (f *retainFlag) storeOptions() store.Options { return store.Options{Retain: f.r} }

// withRetention adds what the retention window thinned to a live command's
// --headless summary.
func withRetention(out *replaySummaryJSON, s store.Summary, r store.Retention) {
	p := r.String()
	out.Retain = &p
	n := s.ThinnedEntries
	out.ThinnedEntries = &n
	if n > 0 {
		d := s.DetailFrom
		out.DetailFrom = &d
	}
}
