//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// standInPATH is PATH with the stand-in npu-smi of dir first.
func standInPATH(dir string) string {
	return "PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// TestDevicesWatchLive: npumon devices --watch at 80x24 follows the stand-in
// npu-smi as its output changes between calls: another layout, a failing
// call (the table stays, the failure is said), and back.
func TestDevicesWatchLive(t *testing.T) {
	bin := npumonBin(t)
	dir := fixture.NPUSMIStandIn(t, "npu-smi/npu-smi-info-910B3x8-24.1.rc1.txt")
	p := startTmux(t, 80, 24, []string{"NO_COLOR=1", standInPATH(dir)}, bin, "devices", "--watch", "--npu-smi-interval", "100ms")
	p.waitFor("npu-smi 24.1.rc1.b030", "7     910B3       OK        98.2W   44C     0%", "3.24 GiB / 64.0 GiB", "no processes hold device memory")

	fixture.SetNPUSMIOutput(t, dir, "npu-smi/npu-smi-info-A3-2chip-25.2.0.txt")
	screen := p.waitFor("npu-smi 25.2.0", "1.1   Ascend910   OK           NA   38C     0%", "10.3 GiB / 64.0 GiB", "1.1   990711    python")
	if strings.Contains(screen, "910B3") {
		t.Errorf("the old table is still shown:\n%s", screen)
	}

	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte("dcmi module initialize failed. ret is -8005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor("last poll failed: npu-smi info: exit status 3: dcmi module", "990711")
	if err := os.Remove(filepath.Join(dir, "fail")); err != nil {
		t.Fatal(err)
	}
	fixture.SetNPUSMIOutput(t, dir, "npu-smi/npu-smi-info-310P3-24.1.0.1-procs.txt")
	p.waitFor("npu-smi 24.1.0.1", "2.1   310P3", "34.4 GiB / 42.7 GiB", "3034989")
	p.waitGone("last poll failed")
	p.send("?")
	p.waitFor("npumon keys", "outside the caching allocator")
	p.send("Escape")
	p.waitGone("npumon keys")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestAttachDevicesOutsideAllocator: attached to a sim whose pid the
// stand-in npu-smi lists with 17400 MB, key D shows that process's device
// memory next to the allocator's reserved bytes and the difference.
func TestAttachDevicesOutsideAllocator(t *testing.T) {
	bin := npumonBin(t)
	sock := filepath.Join(t.TempDir(), "sim.sock")
	_, pid := startSim(t, bin, "--listen", "unix:"+sock, "--layers", "2", "--rate", "5", "--device-mem", "8GiB")
	dir := fixture.NPUSMIStandIn(t, "npu-smi/npu-smi-info-910B2C-23.0.2.1-procs.txt")
	b, err := os.ReadFile(filepath.Join(dir, "info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fixture.SetNPUSMIOutput(t, dir, "text:"+strings.Replace(string(b), "124528", pid, 1))
	p := startTmux(t, 80, 24, []string{"NO_COLOR=1", standInPATH(dir)}, bin, "attach", "unix:"+sock, "--npu-smi-interval", "200ms")
	p.waitFor("LIVE", "resv ")
	p.send("D")
	p.waitFor("▶ 0     "+pid, "▶ pid "+pid+": device memory 17.0 GiB · allocator reserved", "outside the caching allocator")
	p.send("Escape")
	p.waitFor("Timeline")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestDevicesCommandStandIn: the built binary prints the stand-in's figures,
// and without any npu-smi it fails with the message, not simulated devices.
func TestDevicesCommandStandIn(t *testing.T) {
	bin := npumonBin(t)
	dir := fixture.NPUSMIStandIn(t, "npu-smi/npu-smi-info-910B2C-23.0.2.1-procs.txt")
	cmd := exec.Command(bin, "devices")
	cmd.Env = append(os.Environ(), standInPATH(dir))
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "20701 / 65536") || !strings.Contains(string(out), "124528  python3.8  17400") {
		t.Fatalf("%v:\n%s", err, out)
	}
	cmd = exec.Command(bin, "devices")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "NPUMON_NPU_SMI=")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "npu-smi not found") || strings.Contains(string(out), "Ascend910B3") {
		t.Fatalf("%v:\n%s", err, out)
	}
}
