package hugepage

import "syscall"

// advise is madvise(MADV_HUGEPAGE) on [p, p+n); an error (an old kernel,
// THP compiled out) leaves the range as it was, which is correct, only
// slower.
func advise(p, n uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, p, n, syscall.MADV_HUGEPAGE)
}
