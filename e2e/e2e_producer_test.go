//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonProducerInTmux: `npumon attach` in a real terminal on a job run
// through `python -m npumon_producer` with the stand-in torch_npu
// (monitor/producer/python/tests/standin): the header names the producer
// and how coarse its poll-stamped times are, shows the job's OOM, and says
// disconnected once the job has ended.
func TestPythonProducerInTmux(t *testing.T) {
	bin := npumonBin(t)
	py, err := filepath.Abs("../monitor/producer/python")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "job.sock")
	release := filepath.Join(dir, "release")
	job := startProc(t, "env", "PYTHONPATH="+py+string(os.PathListSeparator)+filepath.Join(py, "tests", "standin"),
		"PYTHONDONTWRITEBYTECODE=1", "NPUMON_PRODUCER_ADDR=unix:"+sock,
		"python3", "-m", "npumon_producer", "--interval", "100ms", filepath.Join(py, "tests", "train_standin.py"),
		"--fixture", "../replay/testdata/npu_workspace.pickle", "--clients", "1", "--hold-file", release)
	if l := job.line(waitLimit); !strings.Contains(l, `"ready"`) {
		t.Fatalf("job: %s", l)
	}
	p := startTmux(t, 160, 40, []string{"NO_COLOR=1"}, bin, "attach", "unix:"+sock)
	p.waitFor("times ≈100ms", "OOM 1")
	os.WriteFile(release, nil, 0o600)
	p.waitFor("disconnected")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
