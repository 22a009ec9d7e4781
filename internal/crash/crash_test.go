package crash

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A panic in a goroutine that defers Recover runs the hooks first, then
// reports the panic with its stack and a pointer to report it, and exits 2.
func TestRecoverInGoroutine(t *testing.T) {
	if os.Getenv("CRASH_TEST_CHILD") == "1" {
		OnCrash(func() { os.Stderr.WriteString("hook ran\n") })
		done := make(chan struct{})
		go func() {
			defer Recover()
			var s []int
			_ = s[len(os.Args)] // an index out of range panics
			close(done)
		}()
		<-done
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecoverInGoroutine$")
	cmd.Env = append(os.Environ(), "CRASH_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skip("the test binary cannot run itself here (it runs under an emulator: make test-arm64)")
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	s := string(out)
	hook := strings.Index(s, "hook ran")
	report := strings.Index(s, "npumon: panic: runtime error: index out of range")
	if hook < 0 || report < hook {
		t.Fatalf("the hook must run before the report:\n%s", s)
	}
	for _, want := range []string{"crash_test.go", "This is a bug in npumon. Please report it"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

// The hooks run once however many goroutines crash, and a removed hook
// does not run.
func TestRunHooksOnce(t *testing.T) {
	n := 0
	OnCrash(func() { n++ })
	remove := OnCrash(func() { t.Error("a removed hook ran") })
	remove()
	RunHooks()
	RunHooks()
	if n != 1 {
		t.Fatalf("hook ran %d times", n)
	}
}
