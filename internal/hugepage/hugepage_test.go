package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestAdviseKeepsContents: the hint changes no byte, before or after
// writes, for slices below and above MinBytes (and nil).
func TestAdviseKeepsContents(t *testing.T) {
	Advise[int64](nil)
	for _, n := range []int{0, 100, MinBytes/8 - 1, 3 * MinBytes / 8} {
		s := make([]int64, n/2, n)
		for i := range s {
			s[i] = int64(i) * 7
		}
		Advise(s)
		for i := range s {
			if s[i] != int64(i)*7 {
				t.Fatalf("n=%d: s[%d] = %d", n, i, s[i])
			}
		}
		s = s[:n]
		for i := n / 2; i < n; i++ {
			if s[i] != 0 {
				t.Fatalf("n=%d: fresh s[%d] = %d", n, i, s[i])
			}
		}
	}
}

// TestAdviseMarksRange: on Linux with transparent huge pages, the whole
// huge pages inside a large slice end up in a mapping the kernel marks
// "hg" (VM_HUGEPAGE).
func TestAdviseMarksRange(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("madvise hint on Linux only")
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("no transparent huge pages in this kernel")
	}
	if emulated() {
		t.Skip("runs under an emulator (qemu-user: make test-arm64), which takes the hint without passing it on")
	}
	big := make([]byte, 4*MinBytes)
	Advise(big)
	mid := uintptr(unsafe.Pointer(&big[len(big)/2]))
	if !hugeFlag(t, mid) {
		t.Fatalf("the middle of a %d-byte slice is not in a VM_HUGEPAGE mapping", len(big))
	}
	runtime.KeepAlive(big)
}

// hugeFlag reports whether the mapping holding address p has the hg flag.
func hugeFlag(t *testing.T, p uintptr) bool {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line+" ", " hg ")
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return false
}

// emulated reports whether this test binary runs under a user-mode
// emulator: the kernel's own architecture (/proc/sys/kernel/arch, which
// qemu-user does not rewrite) is not the one it was built for.
func emulated() bool {
	b, err := os.ReadFile("/proc/sys/kernel/arch")
	if err != nil {
		return false // an older kernel: assume native
	}
	native := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "riscv64": "riscv64", "ppc64le": "ppc64le", "s390x": "s390x", "loong64": "loongarch64"}[runtime.GOARCH]
	return native != "" && strings.TrimSpace(string(b)) != native
}
