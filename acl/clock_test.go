package acl

import (
	"sync"
	"testing"
	"time"
)

func TestManualClock(t *testing.T) {
	c := NewManualClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v", c.Now())
	}
	c.Advance(time.Second)
	c.Advance(-time.Hour) // ignored
	if got := c.Now().Sub(t0); got != time.Second {
		t.Fatalf("after Advance: %v", got)
	}
	c.SleepUntil(t0) // in the past: no move backwards
	if got := c.Now().Sub(t0); got != time.Second {
		t.Fatalf("SleepUntil moved back: %v", got)
	}
	c.SleepUntil(t0.Add(5 * time.Second))
	if got := c.Now().Sub(t0); got != 5*time.Second {
		t.Fatalf("SleepUntil: %v", got)
	}
	c.Set(t0.Add(-time.Minute)) // Set may go back
	if got := c.Now().Sub(t0); got != -time.Minute {
		t.Fatalf("Set: %v", got)
	}
}

func TestManualClockConcurrent(t *testing.T) {
	c := NewManualClock(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got := c.Now().Sub(t0); got != 800*time.Millisecond {
		t.Fatalf("800 concurrent advances of 1ms: %v", got)
	}
}

func TestRealClock(t *testing.T) {
	c := RealClock()
	before := time.Now()
	c.SleepUntil(before.Add(-time.Hour)) // past: returns at once
	target := time.Now().Add(20 * time.Millisecond)
	c.SleepUntil(target)
	if now := c.Now(); now.Before(target) {
		t.Fatalf("SleepUntil returned at %v, before %v", now, target)
	}
}
