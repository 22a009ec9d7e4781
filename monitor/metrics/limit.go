package metrics

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// limitListener caps the connections a Server holds, so that a flood on
// /metrics can never take the process's file descriptors (and with them
// the wire listener and attach in the same process). At the cap it makes
// room by closing the connection that has been idle longest (one that
// sent nothing yet, or a keep-alive between requests): idle floods cannot
// lock a scrape out. When every held connection is busy, the new one is
// closed at once.
type limitListener struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    map[*limitConn]struct{}
	idle    map[*limitConn]time.Time // held connections not in a request, since when
	evicted uint64
	refused uint64
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: max, open: map[*limitConn]struct{}{}, idle: map[*limitConn]time.Time{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.open) >= l.max {
			var victim *limitConn
			var since time.Time
			for v, t := range l.idle {
				if victim == nil || t.Before(since) {
					victim, since = v, t
				}
			}
			if victim == nil {
				l.refused++
				l.mu.Unlock()
				c.Close()
				continue
			}
			l.evicted++
			l.forget(victim)
			l.mu.Unlock()
			victim.Conn.Close() // its server goroutine sees the error and ends
			l.mu.Lock()
		}
		lc := &limitConn{Conn: c, l: l}
		l.open[lc] = struct{}{}
		l.idle[lc] = time.Now()
		l.mu.Unlock()
		return lc, nil
	}
}

// forget drops c from the books (l.mu held).
func (l *limitListener) forget(c *limitConn) {
	delete(l.open, c)
	delete(l.idle, c)
}

// held is the number of connections held now.
func (l *limitListener) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

// connState is the http.Server's ConnState hook: it tells idle from busy.
func (l *limitListener) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, held := l.open[lc]; !held {
		return
	}
	switch s {
	case http.StateIdle:
		l.idle[lc] = time.Now()
	case http.StateActive:
		delete(l.idle, lc)
	case http.StateClosed, http.StateHijacked:
		l.forget(lc)
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.forget(c)
		c.l.mu.Unlock()
	})
	return err
}
