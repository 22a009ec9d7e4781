package sim

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay/whatif"
)

// trustFiles are every real snapshot fixture (.pickle and .pkl) and the
// generated traces of this package and of replay's explain tests.
func trustFiles(t *testing.T) []string {
	files := fixture.Glob(t, "snapshots/*.pickle")
	files = append(files, fixture.Glob(t, "snapshots/*.pkl")...)
	gen, _ := filepath.Glob("testdata/*.pickle")
	files = append(files, gen...)
	files = append(files, filepath.Join("..", "..", "testdata", "leak_steps.pickle"))
	if len(files) < 12 {
		t.Fatalf("only %d files", len(files))
	}
	return files
}

// TestNoFitWithoutReproduction: on every fixture and generated trace, with
// the default alternatives, a run is called a fix only where the baseline
// reproduces the recording, and a trace without allocations is not
// simulated at all.
func TestNoFitWithoutReproduction(t *testing.T) {
	for _, path := range trustFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c := load(t, path)
			res, err := Simulate(context.Background(), c, whatif.Options{Confs: whatif.Alternatives(c.Snapshot, nil)})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range res.Devices {
				tr := d.Trust
				t.Logf("dev %d: %s", d.Device, d.TrustLine())
				if tr.Reproduces != (tr.Simulated && len(tr.Mismatch) == 0) {
					t.Errorf("reproduces %v with mismatches %+v", tr.Reproduces, tr.Mismatch)
				}
				if whatif.NothingToSimulate(d.Input) {
					if tr.Simulated || len(d.Runs) != 0 || len(tr.Mismatch) != 1 || tr.Mismatch[0].Code != whatif.ReasonNoAllocations {
						t.Errorf("no allocations, yet %d runs, trust %+v", len(d.Runs), tr)
					}
					continue
				}
				if hasOOM := d.Recorded.FirstOOM != nil; hasOOM != (tr.ReproducesOOM != nil) {
					t.Errorf("recorded OOM %v, reproduces_recorded_oom %v", d.Recorded.FirstOOM, tr.ReproducesOOM)
				}
				for i, r := range d.Runs {
					if r.Verdict == whatif.VerdictFits && !tr.Reproduces {
						t.Errorf("%s fits without reproduction", r.Name)
					}
					if i == 0 && r.Verdict != whatif.VerdictReproduces && r.Verdict != whatif.VerdictDiffers {
						t.Errorf("baseline verdict %q", r.Verdict)
					}
					if i > 0 && r.Verdict == whatif.VerdictUntrusted && tr.Reproduces {
						t.Errorf("%s untrusted though the baseline reproduces", r.Name)
					}
				}
				if !tr.Reproduces && len(tr.Causes) == 0 && !slices.ContainsFunc(tr.Mismatch, func(r whatif.Reason) bool { return r.Code == whatif.ReasonPeakDiffers }) {
					t.Logf("no cause named for %+v", tr.Mismatch)
				}
			}
		})
	}
}

// TestTrustOnKnownTraces: the generated traces whose truth is known.
func TestTrustOnKnownTraces(t *testing.T) {
	codes := func(rs []whatif.Reason) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Code)
		}
		return out
	}
	// fragmentation.pickle reproduces its OOM; expandable segments fit it.
	d := simulateFile(t, "fragmentation.pickle", whatif.Options{Confs: []string{"expandable_segments:True"}})
	if tr := d.Trust; !tr.Reproduces || tr.ReproducesOOM == nil || !*tr.ReproducesOOM || *tr.RecordedOOMIndex != 110 ||
		tr.RecordedPeakReserved != 900*MiB || tr.SimulatedPeakReserved != 900*MiB || tr.PeakCompared != "peak" {
		t.Errorf("fragmentation trust %+v", tr)
	}
	if v := d.Runs[1].Verdict; v != whatif.VerdictFits {
		t.Errorf("expandable_segments verdict %q, want fits", v)
	}

	// lost_history.pickle: the baseline fits where the run ran out, and the
	// history it lacks is named.
	d = simulateFile(t, "lost_history.pickle", whatif.Options{Confs: []string{"expandable_segments:True"}})
	tr := d.Trust
	if tr.Reproduces || tr.ReproducesOOM == nil || *tr.ReproducesOOM {
		t.Fatalf("lost_history trust %+v", tr)
	}
	if got := codes(tr.Mismatch); !slices.Equal(got, []string{whatif.ReasonBaselineFits, whatif.ReasonPeakDiffers}) {
		t.Errorf("mismatch %v", got)
	}
	if got := codes(tr.Causes); !slices.Contains(got, whatif.CauseMissingHistory) || !slices.Contains(got, whatif.CauseGhostBlocks) {
		t.Errorf("causes %v", got)
	}
	if d.Input.Ghosts != 10 || d.Input.GhostBytes != 20*MiB-10*32 {
		t.Errorf("ghosts %d of %d bytes", d.Input.Ghosts, d.Input.GhostBytes)
	}
	if d.Runs[0].Verdict != whatif.VerdictDiffers || d.Runs[1].Verdict != whatif.VerdictUntrusted {
		t.Errorf("verdicts %q %q", d.Runs[0].Verdict, d.Runs[1].Verdict)
	}

	// Another device (--device-mem): the baseline there runs out early, as
	// it must on 512 MiB, but the reproduction is judged on the file's own
	// device (1 GiB from the oom entry), so the answers stay trusted.
	d = simulateFile(t, "fragmentation.pickle", whatif.Options{DeviceMem: 512 * MiB, Confs: []string{"expandable_segments:True"}})
	if tr := d.Trust; !tr.Reproduces || !tr.OnFileDevice || tr.DeviceMem != 1024*MiB || d.Reference == nil || d.FileDeviceMem != 1024*MiB {
		t.Errorf("512 MiB: trust %+v, reference %v", tr, d.Reference != nil)
	}
	if o := d.Runs[0].FirstOOM; o == nil || o.Index != 11 || d.Runs[1].Verdict != whatif.VerdictFails {
		t.Errorf("512 MiB: baseline first OOM %+v, expandable_segments %q", o, d.Runs[1].Verdict)
	}
	// The same device as the file's: no second baseline.
	if d := simulateFile(t, "fragmentation.pickle", whatif.Options{DeviceMem: 1024 * MiB}); d.Reference != nil || d.Trust.OnFileDevice {
		t.Error("a reference baseline on the file's own device size")
	}
}

// TestUntilComparesLikeForLike: runs that end at an oom (explain) are
// judged against the recording up to that entry.
func TestUntilComparesLikeForLike(t *testing.T) {
	d := simulateFile(t, "max_split.pickle", whatif.Options{Until: map[int]int{0: 5}})
	if d.Until != 5 || !d.Trust.Reproduces || d.Fidelity.FinalDiff != 0 {
		t.Errorf("until %d, trust %+v, final Δ %d", d.Until, d.Trust, d.Fidelity.FinalDiff)
	}
}
