// Package poll waits in tests for a condition another goroutine or
// process brings about, instead of sleeping a guessed time. Test-only.
package poll

import (
	"testing"
	"time"
)

// Until calls cond every 2 ms until it holds, and fails tb ("timed out
// waiting for what") when a minute passes first. The limit only ends a test that
// would otherwise hang: cond, not the time, is what the test waits for.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Within(tb, time.Minute, what, cond)
}

// Within is Until with another limit, for work whose time depends on the
// machine (a race build on a loaded one is many times slower): the limit
// catches "never", not "slow".
func Within(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
