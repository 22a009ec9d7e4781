package acl

import (
	"sync"
	"time"
)

// Clock is the simulator's source of time. Stream work completes at fixed
// instants on it; synchronisation waits through SleepUntil.
type Clock interface {
	Now() time.Time
	// SleepUntil blocks (real clock) or jumps the clock forward (manual
	// clock) to t. It returns at once when t is not in the future.
	SleepUntil(t time.Time)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// RealClock returns the wall clock.
func RealClock() Clock { return realClock{} }

// ManualClock is a Clock that moves only when told to (Advance, Set) or when
// a synchronisation waits on it (SleepUntil jumps forward). It makes stream
// and event timing deterministic in tests. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// SleepUntil moves the clock forward to t; it never moves it back.
func (c *ManualClock) SleepUntil(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}

// Advance moves the clock forward by d (negative d is ignored).
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set sets the clock to t, backwards included (for tests of clock skew).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
