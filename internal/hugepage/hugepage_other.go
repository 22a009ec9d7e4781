//go:build !linux

package hugepage

func advise(p, n uintptr) {}
