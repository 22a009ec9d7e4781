package monitor

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npumon/npumon/allocator"
)

// ServerOptions configure the producer side of the wire protocol.
type ServerOptions struct {
	// Hello is sent to every client. PID, Host, StartUS and ClockSource
	// default to this process; Version and NowUS are filled in.
	Hello Hello
	// Snapshot returns the producer's current state for a new client, and
	// per device the sequence number (see Published) of the first entry the
	// state does not reflect; entries before it are not sent to that
	// client. A nil map means "everything published so far". Nil Snapshot:
	// clients start from an empty state.
	Snapshot func() (*allocator.Snapshot, map[int]uint64)
	// Stack resolves the StackIDs of published entries (sent once per
	// client in STACKS frames). Must be safe for concurrent use. Nil: stack
	// ids are sent without frames.
	Stack func(allocator.StackID) allocator.Stack
	// Devices reports current device information for heartbeats (optional).
	Devices func() []DeviceInfo
	// QueueEntries bounds each client's queue (default 65536 entries);
	// beyond it entries are dropped for that client and a GAP follows.
	QueueEntries int
	// Heartbeat is the heartbeat interval (default 1 s).
	Heartbeat time.Duration
	// ResyncInterval: after entries were dropped for a client, a fresh
	// SNAPSHOT (from Snapshot) repairs its state, at most once per interval
	// (default 1 s; negative: never).
	ResyncInterval time.Duration
}

// ServerStats are a Server's counters.
type ServerStats struct {
	Clients   int
	Published uint64 // entries handed to Publish
	Dropped   uint64 // entry copies dropped for slow clients (summed over clients)
}

// Server serves an allocator's trace to npumon clients. Publish never
// blocks on a client: each client has a bounded queue drained by its own
// goroutine.
type Server struct {
	ln   net.Listener
	opts ServerOptions

	pubMu   sync.Mutex // orders Publish calls: sequence numbers and queue order
	seq     map[int]uint64
	clients map[*serverClient]struct{}

	published atomic.Uint64
	dropped   atomic.Uint64
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	start     int64
}

// DefaultSocketDir is where producers put their Unix sockets:
// $XDG_RUNTIME_DIR/npumon, else <tmp>/npumon-<uid>.
func DefaultSocketDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "npumon")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("npumon-%d", os.Getuid()))
}

// DefaultSocketPath is the socket a producer with process id pid serves on.
func DefaultSocketPath(pid int) string {
	return filepath.Join(DefaultSocketDir(), fmt.Sprintf("%d.sock", pid))
}

// DefaultTCPAddr is the loopback address producers use for TCP when no
// other address is asked for explicitly.
const DefaultTCPAddr = "127.0.0.1:7787"

// Listen opens a producer endpoint: network "unix" (the socket file gets
// mode 0600 in a 0700 directory; a stale socket is replaced) or "tcp"
// (an address without a host means loopback).
func Listen(network, address string, opts ServerOptions) (*Server, error) {
	var ln net.Listener
	var err error
	switch network {
	case "unix":
		if address == "" {
			address = DefaultSocketPath(os.Getpid())
		}
		if err := os.MkdirAll(filepath.Dir(address), 0o700); err != nil {
			return nil, fmt.Errorf("monitor: listen %s: %w", address, err)
		}
		if _, err := os.Stat(address); err == nil {
			if c, err := net.DialTimeout("unix", address, 200*time.Millisecond); err == nil {
				c.Close()
				return nil, fmt.Errorf("monitor: listen %s: another producer is serving there", address)
			}
			os.Remove(address)
		}
		ln, err = net.Listen("unix", address)
		if err == nil {
			err = os.Chmod(address, 0o600)
		}
	case "tcp", "tcp4", "tcp6":
		if address == "" {
			address = DefaultTCPAddr
		}
		if host, port, e := net.SplitHostPort(address); e == nil && host == "" {
			address = net.JoinHostPort("127.0.0.1", port)
		}
		ln, err = net.Listen(network, address)
	default:
		return nil, fmt.Errorf("monitor: listen: unsupported network %q (unix or tcp)", network)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("monitor: listen %s %s: %w", network, address, err)
	}
	return Serve(ln, opts), nil
}

// Serve serves clients accepted from ln until Close.
func Serve(ln net.Listener, opts ServerOptions) *Server {
	if opts.QueueEntries <= 0 {
		opts.QueueEntries = 1 << 16
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Second
	}
	s := &Server{ln: ln, opts: opts, seq: map[int]uint64{}, clients: map[*serverClient]struct{}{},
		closed: make(chan struct{}), start: time.Now().UnixMicro()}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, says BYE to clients and closes their connections.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.pubMu.Lock()
		for c := range s.clients {
			// a client that stopped reading gets a second to take the BYE
			c.conn.SetWriteDeadline(time.Now().Add(time.Second))
			c.wakeUp()
		}
		s.pubMu.Unlock()
		s.wg.Wait()
		if u, ok := s.ln.Addr().(*net.UnixAddr); ok {
			os.Remove(u.Name)
		}
	})
	return err
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.pubMu.Lock()
	n := len(s.clients)
	s.pubMu.Unlock()
	return ServerStats{Clients: n, Published: s.published.Load(), Dropped: s.dropped.Load()}
}

// Published returns the number of entries published for device so far,
// i.e. the sequence number the next one gets.
func (s *Server) Published(device int) uint64 {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.seq[device]
}

// Publish hands entries of device to every client. It never blocks on a
// client: a full queue drops the entries for that client (a GAP record
// follows). entries may be reused after Publish returns.
func (s *Server) Publish(device int, entries []allocator.TraceEntry) {
	if len(entries) == 0 {
		return
	}
	s.pubMu.Lock()
	first := s.seq[device]
	s.seq[device] = first + uint64(len(entries))
	for c := range s.clients {
		if !c.push(device, first, entries) {
			s.dropped.Add(uint64(len(entries)))
		}
	}
	s.pubMu.Unlock()
	s.published.Add(uint64(len(entries)))
}

// PublishGap tells every client that missed entries of device were lost
// before they reached the server (e.g. an allocator tracker's buffer was
// full); they take up sequence numbers like published entries.
func (s *Server) PublishGap(device int, missed uint64) {
	if missed == 0 {
		return
	}
	s.pubMu.Lock()
	s.seq[device] += missed
	next := s.seq[device]
	for c := range s.clients {
		c.mu.Lock()
		g := c.missed[device]
		g.missed += missed
		g.next = next
		c.missed[device] = g
		c.mu.Unlock()
		c.wakeUp()
	}
	s.pubMu.Unlock()
}

// PublishOps hands profiler ops to every client (dropped for a client
// whose queue is full).
func (s *Server) PublishOps(ops []Op) {
	if len(ops) == 0 {
		return
	}
	s.pubMu.Lock()
	for c := range s.clients {
		c.pushOps(ops)
	}
	s.pubMu.Unlock()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := &serverClient{conn: conn, limit: s.opts.QueueEntries, wake: make(chan struct{}, 1), missed: map[int]gapInfo{}, sent: map[allocator.StackID]bool{}}
		s.wg.Add(1)
		go s.serveClient(c)
	}
}

// gapInfo is a run of entries dropped for one client.
type gapInfo struct{ missed, next uint64 }

// qitem is an ENTRIES batch or (gap.missed > 0) a GAP record.
type qitem struct {
	device  int
	first   uint64
	entries []allocator.TraceEntry
	gap     gapInfo
}

type serverClient struct {
	conn  net.Conn
	limit int
	wake  chan struct{}

	mu     sync.Mutex
	q      []qitem
	qn     int // entries in q
	ops    []Op
	missed map[int]gapInfo // drops not yet queued as GAP items
	dead   bool

	sent map[allocator.StackID]bool // writer goroutine only
}

func (c *serverClient) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// push queues entries; false when they were dropped.
func (c *serverClient) push(device int, first uint64, entries []allocator.TraceEntry) bool {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return true
	}
	if c.qn+len(entries) > c.limit {
		g := c.missed[device]
		g.missed += uint64(len(entries))
		g.next = first + uint64(len(entries))
		c.missed[device] = g
		c.mu.Unlock()
		return false
	}
	c.flushMissedLocked()
	if n := len(c.q); n > 0 && c.q[n-1].gap.missed == 0 && c.q[n-1].device == device &&
		c.q[n-1].first+uint64(len(c.q[n-1].entries)) == first {
		c.q[n-1].entries = append(c.q[n-1].entries, entries...)
	} else {
		c.q = append(c.q, qitem{device: device, first: first, entries: append(make([]allocator.TraceEntry, 0, max(len(entries), 64)), entries...)})
	}
	c.qn += len(entries)
	c.mu.Unlock()
	c.wakeUp()
	return true
}

func (c *serverClient) flushMissedLocked() {
	if len(c.missed) == 0 {
		return
	}
	devs := make([]int, 0, len(c.missed))
	for d := range c.missed {
		devs = append(devs, d)
	}
	slices.Sort(devs)
	for _, d := range devs {
		c.q = append(c.q, qitem{device: d, gap: c.missed[d]})
	}
	clear(c.missed)
}

func (c *serverClient) pushOps(ops []Op) {
	c.mu.Lock()
	if !c.dead && len(c.ops)+len(ops) <= c.limit {
		c.ops = append(c.ops, ops...)
	}
	c.mu.Unlock()
	c.wakeUp()
}

// take swaps out everything queued (including pending gaps).
func (c *serverClient) take() ([]qitem, []Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushMissedLocked()
	q, ops := c.q, c.ops
	c.q, c.ops, c.qn = nil, nil, 0
	return q, ops
}

func (s *Server) hello() Hello {
	h := s.opts.Hello
	h.Version = ProtocolVersion
	h.NowUS = time.Now().UnixMicro()
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	if h.Host == "" {
		h.Host, _ = os.Hostname()
	}
	if h.StartUS == 0 {
		h.StartUS = s.start
	}
	if h.ClockSource == "" {
		h.ClockSource = "realtime"
	}
	return h
}

func (s *Server) serveClient(c *serverClient) {
	defer s.wg.Done()
	defer c.conn.Close()
	// Register before taking the snapshot, so that nothing published after
	// it is missed; what it already reflects is trimmed below.
	s.pubMu.Lock()
	s.clients[c] = struct{}{}
	s.pubMu.Unlock()
	defer func() {
		s.pubMu.Lock()
		delete(s.clients, c)
		s.pubMu.Unlock()
		c.mu.Lock()
		c.dead = true
		c.q, c.ops = nil, nil
		c.mu.Unlock()
	}()
	// A client never sends anything: bytes or EOF end the session.
	go func() {
		var b [1]byte
		c.conn.Read(b[:])
		c.conn.Close()
	}()

	e := &enc{}
	h := s.hello()
	encodeHello(e, &h)
	resume := s.encodeState(c, e)
	if !c.write(e) {
		return
	}
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	var gapped bool // a GAP was sent and no snapshot has repaired it yet
	lastSync := time.Now()
	for {
		select {
		case <-s.closed:
			s.flush(c, e, resume)
			encodeBye(e, "producer closing")
			c.write(e)
			return
		case <-tick.C:
			var devs []DeviceInfo
			if s.opts.Devices != nil {
				devs = s.opts.Devices()
			}
			encodeHeartbeat(e, time.Now().UnixMicro(), devs)
			if !c.write(e) {
				return
			}
		case <-c.wake:
		}
		g, ok := s.flush(c, e, resume)
		if !ok {
			return
		}
		gapped = gapped || g
		// after drops, a fresh snapshot makes the client's state exact again
		if gapped && s.opts.Snapshot != nil && s.opts.ResyncInterval >= 0 && time.Since(lastSync) >= s.opts.ResyncInterval {
			resume = s.encodeState(c, e)
			if !c.write(e) {
				return
			}
			gapped, lastSync = false, time.Now()
		}
	}
}

// encodeState encodes the producer's state (STACKS and SNAPSHOT) for c and
// returns, per device, the first sequence number it does not reflect.
func (s *Server) encodeState(c *serverClient, e *enc) map[int]uint64 {
	var snap *allocator.Snapshot
	var resume map[int]uint64
	if s.opts.Snapshot != nil {
		snap, resume = s.opts.Snapshot()
	}
	if resume == nil {
		s.pubMu.Lock()
		resume = make(map[int]uint64, len(s.seq))
		for d, n := range s.seq {
			resume[d] = n
		}
		s.pubMu.Unlock()
	}
	var segs []allocator.Segment
	if snap != nil {
		segs = snap.Segments
		var ids []allocator.StackID
		var stacks []allocator.Stack
		add := func(id allocator.StackID) {
			if id <= 0 || c.sent[id] {
				return
			}
			var st allocator.Stack
			if int(id) < len(snap.Stacks) {
				st = snap.Stacks[id]
			} else if s.opts.Stack != nil {
				st = s.opts.Stack(id)
			}
			c.sent[id] = true
			ids, stacks = append(ids, id), append(stacks, st)
		}
		for i := range segs {
			add(segs[i].Frames)
			for j := range segs[i].Blocks {
				add(segs[i].Blocks[j].Frames)
			}
		}
		if len(ids) > 0 {
			encodeStacks(e, ids, stacks)
		}
	}
	encodeSnapshot(e, segs, resume)
	return resume
}

// flush encodes and writes everything queued for c; gapped reports a GAP.
func (s *Server) flush(c *serverClient, e *enc, resume map[int]uint64) (gapped, ok bool) {
	q, ops := c.take()
	for _, it := range q {
		if it.gap.missed > 0 {
			encodeGap(e, it.device, it.gap.missed, it.gap.next)
			gapped = true
			continue
		}
		ents, first := it.entries, it.first
		if r := resume[it.device]; first < r { // already in the snapshot
			skip := min(r-first, uint64(len(ents)))
			ents, first = ents[skip:], first+skip
		}
		if len(ents) == 0 {
			continue
		}
		s.newStacks(c, e, ents)
		// keep frames well under MaxFrame
		for len(ents) > 0 {
			n := min(len(ents), 32768)
			encodeEntries(e, it.device, first, ents[:n])
			ents, first = ents[n:], first+uint64(n)
			if len(e.b) > 1<<20 && !c.write(e) {
				return gapped, false
			}
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), 8192)
		encodeOps(e, ops[:n])
		ops = ops[n:]
	}
	return gapped, c.write(e)
}

// newStacks writes a STACKS frame for stack ids c has not seen yet.
func (s *Server) newStacks(c *serverClient, e *enc, ents []allocator.TraceEntry) {
	if s.opts.Stack == nil {
		return
	}
	var ids []allocator.StackID
	var stacks []allocator.Stack
	for i := range ents {
		id := ents[i].Frames
		if id <= 0 || c.sent[id] {
			continue
		}
		c.sent[id] = true
		ids, stacks = append(ids, id), append(stacks, s.opts.Stack(id))
	}
	if len(ids) > 0 {
		encodeStacks(e, ids, stacks)
	}
}

// write sends and resets the buffer; false when the client is gone.
func (c *serverClient) write(e *enc) bool {
	if len(e.b) == 0 {
		return true
	}
	_, err := c.conn.Write(e.b)
	if cap(e.b) > 8<<20 {
		e.b = nil
	} else {
		e.b = e.b[:0]
	}
	return err == nil
}
