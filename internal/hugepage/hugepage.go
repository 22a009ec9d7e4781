// Package hugepage asks the kernel to back large, long-lived slices with
// transparent huge pages. On Linux with transparent_hugepage set to
// "madvise" (a common default) anonymous memory is faulted in 4 KiB at a
// time unless a range asks otherwise, and each fault costs microseconds
// (many more under a hypervisor): a 72 MiB trace slice costs 18,000 of
// them, 2 MiB pages 36. Go's runtime no longer asks for huge pages
// itself (Go 1.21.1).
package hugepage

import "unsafe"

// MinBytes is the smallest slice Advise bothers with: below it, whole
// 2 MiB pages inside it are too few to matter.
const MinBytes = 8 << 20

// pageBytes is the huge page size hinted for (x86-64 and arm64 with 4 KiB
// base pages; elsewhere the hint is merely coarser).
const pageBytes = 2 << 20

// Advise hints that the backing array of s, up to its capacity, be
// backed by huge pages. Call it on a fresh slice before writing to it:
// pages already touched stay small. It changes nothing s holds; where the
// hint is not available (another OS, THP off) it does nothing.
func Advise[T any](s []T) {
	var zero T
	n := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if n < MinBytes {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	// whole huge pages inside the array only: the hint applies to the
	// pages it covers, and the array's neighbours are not ours to change
	lo := (p + pageBytes - 1) &^ (pageBytes - 1)
	hi := (p + n) &^ (pageBytes - 1)
	if hi > lo {
		advise(lo, hi-lo)
	}
}
