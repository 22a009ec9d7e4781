package wire

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/store"
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
	// clients start from an empty state and get every entry published
	// after they connected.
	Snapshot func() (*snapshot.Snapshot, map[int]uint64)
	// Stack resolves the StackIDs of published entries (sent once per
	// client in STACKS frames). Must be safe for concurrent use. Nil: stack
	// ids are sent without frames.
	Stack func(snapshot.StackID) snapshot.Stack
	// Actions names the published entries' actions beyond the known ones
	// (nil: there are none; such an entry is sent as "other").
	Actions *snapshot.ActionTable
	// Texts holds the strings the published entries name by TextID (nil:
	// they name none).
	Texts *snapshot.TextTable
	// Devices reports current device information for heartbeats (optional).
	Devices func() []store.DeviceInfo
	// Peaks reports the producer's own peaks per device since it started,
	// sent in every HELLO (optional).
	Peaks func() []DevicePeak
	// QueueBytes bounds the memory of the queue of entries (and ops) the
	// server holds for clients that have not sent them yet, shared by all
	// clients (default DefaultQueueBytes: about 300,000 entries, 300 ms at
	// 1 M entries/s). A client that falls further behind loses the oldest:
	// a GAP follows, then a fresh snapshot (ResyncInterval).
	QueueBytes int
	// QueueEntries, when positive, also bounds the queue by its entries
	// (and ops) in it; 0: only QueueBytes bounds it.
	QueueEntries int
	// Heartbeat is the heartbeat interval (default 1 s).
	Heartbeat time.Duration
	// ResyncInterval: after entries were dropped for a client, a fresh
	// SNAPSHOT (from Snapshot) repairs its state, at most once per interval
	// (default 1 s; negative: never).
	ResyncInterval time.Duration
	// MaxClients caps the clients served at once (default 16); one more
	// gets a BYE saying so and is closed.
	MaxClients int
	// WriteTimeout: a client that takes longer than this to accept one
	// write (it stopped reading) is disconnected (default 5 s).
	WriteTimeout time.Duration
	// ClientBuffer is the most bytes encoded for a client before they are
	// written to it (default 256 KiB), besides one snapshot or stack frame.
	ClientBuffer int
	// SocketBuffer is the kernel send buffer asked for each client's
	// connection (SO_SNDBUF; default DefaultSocketBuffer, which the kernel
	// caps at net.core.wmem_max): encoded frames that wait there for a
	// client not scheduled in time are not dropped. Negative: the
	// system's default.
	SocketBuffer int
	// Logf receives one line per notable event: a client dropped for
	// stalling, entries dropped for a slow client, a refused client, a
	// warning about the listening address. Default: standard error, with
	// an "npumon: " prefix. Use func(string, ...any) {} for silence.
	Logf func(format string, args ...any)
}

// ServerStats are a Server's counters.
type ServerStats struct {
	Clients   int
	Published uint64 // entries handed to Publish
	Dropped   uint64 // entry copies dropped for slow clients (summed over clients)
	Refused   uint64 // connections refused over MaxClients
	Stalled   uint64 // clients disconnected for not reading (WriteTimeout)
}

// Server serves an allocator's trace to npumon clients. Publish never
// waits for a client: entries are copied once into a bounded queue shared
// by all clients, each of which sends from it on its own goroutine at its
// own pace; a client that falls behind the queue loses the oldest entries
// (a GAP follows), and one that stops reading is disconnected.
type Server struct {
	ln   net.Listener
	opts ServerOptions

	pubMu   sync.Mutex // orders Publish calls: sequence numbers and queue order
	seq     map[int]uint64
	clients map[*serverClient]struct{}
	q       recQueue

	published atomic.Uint64
	dropped   atomic.Uint64
	refused   atomic.Uint64
	stalled   atomic.Uint64
	closed    chan struct{}
	closeBy   atomic.Int64 // unix ns: the deadline for goodbyes, once closing
	closeOnce sync.Once
	wg        sync.WaitGroup
	start     int64
	nextID    atomic.Uint64
	logCh     chan string // lines for opts.Logf, written by their own goroutine
}

// logf hands a line to the logging goroutine without waiting: a blocked
// stderr must not stall Publish. Lines beyond the buffer are lost.
func (s *Server) logf(format string, args ...any) {
	select {
	case s.logCh <- fmt.Sprintf(format, args...):
	default:
	}
}

func (s *Server) logLoop() {
	for {
		select {
		case l := <-s.logCh:
			s.opts.Logf("%s", l)
		case <-s.closed:
			for {
				select {
				case l := <-s.logCh:
					s.opts.Logf("%s", l)
				default:
					return
				}
			}
		}
	}
}

// record is one item of the shared queue: entries of a device (first is
// the sequence number of entries[0]), a loss upstream (gapNext > 0: the
// device's sequence jumps to gapNext), or ops.
type record struct {
	device  int
	first   uint64
	entries []snapshot.TraceEntry
	gapNext uint64
	ops     []store.Op
	bytes   int // memory held, as recBytes counts it
}

func (r *record) size() int { return max(len(r.entries)+len(r.ops), 1) }

// Memory a queue record holds: its slices' capacity and the strings of its
// ops, plus the record itself (entries name their strings by TextID).
const (
	entryBytes  = int(unsafe.Sizeof(snapshot.TraceEntry{}))
	opBytes     = int(unsafe.Sizeof(store.Op{}))
	recordBytes = int(unsafe.Sizeof(record{}))
)

func recBytes(r *record) int {
	n := recordBytes + cap(r.entries)*entryBytes + cap(r.ops)*opBytes
	for i := range r.ops {
		n += len(r.ops[i].Name) + len(r.ops[i].InputDims)
	}
	return n
}

// recQueue is the shared queue: recs[h:] are records base.. in order.
type recQueue struct {
	recs  []record
	h     int
	base  uint64 // index of recs[h]
	held  int    // size() summed over recs[h:]
	bytes int    // bytes summed over recs[h:]
}

func (q *recQueue) end() uint64 { return q.base + uint64(len(q.recs)-q.h) }

func (q *recQueue) at(i uint64) *record { return &q.recs[q.h+int(i-q.base)] }

// cursor is a client's position in the queue: record rec, its first off
// entries (or ops) already taken.
type cursor struct {
	rec uint64
	off int
}

// DefaultSocketDir is where producers put their Unix sockets:
// $XDG_RUNTIME_DIR/npumon, else <tmp>/npumon-<uid>. Listen and a client
// attaching by pid check it (CheckSocketDir) before using it.
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
// mode 0600 in a 0700 directory; the default directory must be this user's
// with mode 0700; a stale socket is replaced, anything else at the path is
// left alone and refused) or "tcp" (an address without a host means
// loopback; any other host gets a warning through Logf, since the stream
// carries stack frames: file and function names).
func Listen(network, address string, opts ServerOptions) (*Server, error) {
	opts = serverDefaults(opts)
	var ln net.Listener
	var err error
	switch network {
	case "unix":
		if address == "" {
			address = DefaultSocketPath(os.Getpid())
		}
		if err := prepareSocketPath(address); err != nil {
			return nil, fmt.Errorf("monitor: listen %s: %w", address, err)
		}
		ln, err = net.Listen("unix", address)
		if err == nil {
			err = os.Chmod(address, 0o600)
		}
	case "tcp", "tcp4", "tcp6":
		address = listenTCPAddress(address)
		ln, err = net.Listen(network, address)
		if err == nil && !IsLoopback(ln.Addr()) {
			opts.Logf("warning: serving on %s (%s), reachable from other hosts; the stream carries stack frames (file and function names) and is neither authenticated nor encrypted (docs/protocol.md, Security)", address, ln.Addr())
		}
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

// listenTCPAddress is the address Listen listens on for a TCP address:
// DefaultTCPAddr when it is empty, loopback when it names no host
// (testdata/socket_rules.json).
func listenTCPAddress(address string) string {
	if address == "" {
		return DefaultTCPAddr
	}
	if host, port, err := net.SplitHostPort(address); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return address
}

// IsLoopback reports whether a listening address is reachable only from
// this host (a Unix socket, or TCP on a loopback address).
func IsLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// prepareSocketPath makes the directory of a socket path ready and clears
// a stale socket there. Only a socket nobody answers on is removed.
func prepareSocketPath(address string) error {
	dir := filepath.Dir(address)
	if filepath.Clean(dir) == filepath.Clean(DefaultSocketDir()) {
		if err := CheckSocketDir(dir, true); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(address)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket (%s); not replacing it", address, describeMode(fi.Mode()))
	}
	c, err := net.DialTimeout("unix", address, 500*time.Millisecond)
	if err == nil {
		c.Close()
		return errors.New("another producer is serving there")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether the socket is in use (%v); not replacing it", address, err)
	}
	if err := os.Remove(address); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale socket: %w", err)
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	}
	return m.Type().String()
}

// DefaultQueueBytes is ServerOptions.QueueBytes's default.
const DefaultQueueBytes = 32 << 20

// DefaultSocketBuffer is ServerOptions.SocketBuffer's default: at about 13
// encoded bytes per entry, 4 MiB (which the kernel doubles, counting its
// own bookkeeping in it) holds some 300,000 to 600,000 entries more per
// client.
const DefaultSocketBuffer = 4 << 20

func serverDefaults(opts ServerOptions) ServerOptions {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultQueueBytes
	}
	if opts.QueueEntries < 0 {
		opts.QueueEntries = 0
	}
	if opts.SocketBuffer == 0 {
		opts.SocketBuffer = DefaultSocketBuffer
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = time.Second
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = 16
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.ClientBuffer <= 0 {
		opts.ClientBuffer = 256 << 10
	}
	if opts.Logf == nil {
		opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "npumon: "+f+"\n", a...) }
	}
	return opts
}

// Serve serves clients accepted from ln until Close.
func Serve(ln net.Listener, opts ServerOptions) *Server {
	opts = serverDefaults(opts)
	s := &Server{ln: ln, opts: opts, seq: map[int]uint64{}, clients: map[*serverClient]struct{}{},
		closed: make(chan struct{}), start: time.Now().UnixMicro(), logCh: make(chan string, 64)}
	go func() { defer crash.Recover(); s.logLoop() }()
	s.wg.Add(1)
	go func() { defer crash.Recover(); s.acceptLoop() }()
	return s
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// closeGrace bounds Close: clients get this long to take their BYE; then
// their connections are closed under them. A client already stuck in one
// write for that long when Close begins has had its grace: it is closed
// at once (a client that stopped reading would only hold the exit up).
const closeGrace = time.Second

// Close stops accepting, says BYE to clients and closes their connections.
// It returns within about 1.5 s however the clients behave; at once when
// the only ones left have taken nothing for closeGrace.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		by := time.Now().Add(closeGrace)
		s.closeBy.Store(by.UnixNano())
		close(s.closed)
		// The socket path goes as listening stops, not after the clients'
		// grace below: by then a restarted producer may serve there.
		if u, ok := s.ln.Addr().(*net.UnixAddr); ok && u.Name != "" && u.Name[0] != '@' {
			if ul, ok := s.ln.(*net.UnixListener); ok {
				ul.SetUnlinkOnClose(false) // removed here, once
			}
			os.Remove(u.Name)
		}
		err = s.ln.Close()
		s.pubMu.Lock()
		stuckSince := time.Now().Add(-closeGrace).UnixNano()
		for c := range s.clients {
			if w := c.writingSince.Load(); w != 0 && w <= stuckSince {
				c.conn.Close() // its write fails now: nothing of the BYE would get through
				continue
			}
			c.conn.SetWriteDeadline(by)
			c.wakeUp()
		}
		s.pubMu.Unlock()
		done := make(chan struct{})
		go func() { defer crash.Recover(); s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGrace + 250*time.Millisecond):
			// a client goroutine is stuck outside a write (e.g. waiting
			// for a snapshot): close the connections under them
			s.pubMu.Lock()
			for c := range s.clients {
				c.conn.Close()
			}
			s.pubMu.Unlock()
			select {
			case <-done:
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return err
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.pubMu.Lock()
	n := len(s.clients)
	s.pubMu.Unlock()
	return ServerStats{Clients: n, Published: s.published.Load(), Dropped: s.dropped.Load(),
		Refused: s.refused.Load(), Stalled: s.stalled.Load()}
}

// Published returns the number of entries published for device so far,
// i.e. the sequence number the next one gets.
func (s *Server) Published(device int) uint64 {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.seq[device]
}

// maxRecord caps the entries merged into one queue record, so that
// eviction frees memory in small steps.
const maxRecord = 4096

// Publish hands entries of device to every client. It never waits for a
// client: the entries are copied once into the shared queue. entries may
// be reused after Publish returns.
func (s *Server) Publish(device int, entries []snapshot.TraceEntry) {
	if len(entries) == 0 {
		return
	}
	s.pubMu.Lock()
	first := s.seq[device]
	s.seq[device] = first + uint64(len(entries))
	if len(s.clients) > 0 {
		q := &s.q
		if n := len(q.recs); n > q.h {
			last := &q.recs[n-1]
			if last.entries != nil && last.device == device && last.first+uint64(len(last.entries)) == first && len(last.entries)+len(entries) <= maxRecord {
				// clients hold this record's slice with its old length:
				// appending never changes what they see (a larger array
				// leaves the old one to them)
				if need := len(last.entries) + len(entries); need > cap(last.entries) {
					grown := make([]snapshot.TraceEntry, len(last.entries), min(maxRecord, max(2*cap(last.entries), need)))
					copy(grown, last.entries)
					q.bytes += (cap(grown) - cap(last.entries)) * entryBytes
					last.bytes += (cap(grown) - cap(last.entries)) * entryBytes
					last.entries = grown
				}
				last.entries = append(last.entries, entries...)
				q.held += len(entries)
				s.trimLocked()
				s.wakeAllLocked()
				s.pubMu.Unlock()
				s.published.Add(uint64(len(entries)))
				return
			}
		}
		// room for more to be merged into it (doubled as they come), yet
		// a record of a few entries holds little memory (its capacity
		// counts against QueueBytes)
		ents := make([]snapshot.TraceEntry, 0, max(len(entries), min(maxRecord, 64*len(entries))))
		s.pushLocked(record{device: device, first: first, entries: append(ents, entries...)})
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
	if len(s.clients) > 0 {
		s.pushLocked(record{device: device, gapNext: s.seq[device]})
	}
	s.pubMu.Unlock()
}

// PublishOps hands profiler ops to every client.
func (s *Server) PublishOps(ops []store.Op) {
	if len(ops) == 0 {
		return
	}
	s.pubMu.Lock()
	if len(s.clients) > 0 {
		s.pushLocked(record{ops: slices.Clone(ops)})
	}
	s.pubMu.Unlock()
}

func (s *Server) pushLocked(r record) {
	q := &s.q
	if q.h > 0 && q.h >= len(q.recs)/2 {
		n := copy(q.recs, q.recs[q.h:])
		clear(q.recs[n:])
		q.recs, q.h = q.recs[:n], 0
	}
	r.bytes = recBytes(&r)
	q.recs = append(q.recs, r)
	q.held += r.size()
	q.bytes += r.bytes
	s.trimLocked()
	s.wakeAllLocked()
}

// trimLocked drops the oldest records while the queue holds too much; a
// client that had not taken them yet loses them (counted, and a GAP is
// sent to it).
func (s *Server) trimLocked() {
	q := &s.q
	for (q.bytes > s.opts.QueueBytes || s.opts.QueueEntries > 0 && q.held > s.opts.QueueEntries) && len(q.recs)-q.h > 1 {
		r := &q.recs[q.h]
		for c := range s.clients {
			if c.cur.rec != q.base {
				continue
			}
			if r.entries != nil {
				if n := len(r.entries) - c.cur.off; n > 0 {
					c.lost[r.device] = max(c.lost[r.device], r.first+uint64(len(r.entries)))
					c.dropped += uint64(n)
					s.dropped.Add(uint64(n))
					if now := time.Now(); now.Sub(c.lastDropLog) > 5*time.Second {
						s.logf("client #%d fell behind: %d entries dropped for it (a GAP tells it)", c.id, c.dropped-c.loggedDrops)
						c.lastDropLog, c.loggedDrops = now, c.dropped
					}
				}
			} else if r.gapNext > 0 {
				c.lost[r.device] = max(c.lost[r.device], r.gapNext)
			}
			c.cur = cursor{rec: q.base + 1}
		}
		q.held -= r.size()
		q.bytes -= r.bytes
		*r = record{}
		q.h++
		q.base++
	}
}

// wakeAllLocked wakes the clients waiting for data; a busy one takes the
// new records when it comes back to the queue anyway.
func (s *Server) wakeAllLocked() {
	for c := range s.clients {
		if c.idle {
			c.idle = false
			c.wakeUp()
		}
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	var lastRefusedLog time.Time
	var refusedSince uint64
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
		s.pubMu.Lock()
		full := len(s.clients) >= s.opts.MaxClients
		var c *serverClient
		if !full {
			c = &serverClient{id: s.nextID.Add(1), conn: conn, wake: make(chan struct{}, 1), lost: map[int]uint64{},
				sent: map[snapshot.StackID]bool{}, cur: cursor{rec: s.q.end()}, idle: true, joined: maps.Clone(s.seq)}
			// registered before its snapshot is taken, so that nothing
			// published after it is missed; what it reflects is trimmed
			s.clients[c] = struct{}{}
		}
		s.pubMu.Unlock()
		if full {
			s.refused.Add(1)
			refusedSince++
			e := &enc{}
			encodeBye(e, fmt.Sprintf("too many clients (%d); try again later", s.opts.MaxClients))
			conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			conn.Write(e.b)
			conn.Close()
			if time.Since(lastRefusedLog) > 5*time.Second {
				s.logf("refused %d client(s): %d already connected (MaxClients)", refusedSince, s.opts.MaxClients)
				lastRefusedLog, refusedSince = time.Now(), 0
			}
			continue
		}
		if b, ok := conn.(interface{ SetWriteBuffer(int) error }); ok && s.opts.SocketBuffer > 0 {
			b.SetWriteBuffer(s.opts.SocketBuffer) // best effort: the kernel caps it
		}
		s.wg.Add(1)
		go func() { defer crash.Recover(); s.serveClient(c) }()
	}
}

type serverClient struct {
	id   uint64
	conn net.Conn
	wake chan struct{}

	// guarded by Server.pubMu
	cur         cursor
	lost        map[int]uint64 // per device: a sequence number up to which entries were dropped
	dropped     uint64
	lastDropLog time.Time
	loggedDrops uint64
	idle        bool // took everything there was: Publish wakes it

	// writingSince is when the write in progress began (UnixNano; 0: none)
	writingSince atomic.Int64

	// writer goroutine only
	joined map[int]uint64 // the sequence numbers when it was registered: the queue holds what follows
	sent   map[snapshot.StackID]bool
	want   map[int]uint64 // per device: the next sequence number the client expects
	gapped bool           // a GAP was sent and no snapshot has repaired it yet
}

func (c *serverClient) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
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
	if s.opts.Peaks != nil {
		h.Peaks = s.opts.Peaks()
	}
	return h
}

// errStalled is a client that did not take a write within WriteTimeout.
var errStalled = errors.New("stalled")

func (s *Server) serveClient(c *serverClient) {
	defer s.wg.Done()
	defer c.conn.Close()
	defer func() {
		s.pubMu.Lock()
		delete(s.clients, c)
		s.pubMu.Unlock()
	}()
	// A client never sends anything: bytes or EOF end the session.
	go func() {
		defer crash.Recover()
		var b [1]byte
		c.conn.Read(b[:])
		c.conn.Close()
	}()

	e := &enc{actions: s.opts.Actions, texts: s.opts.Texts}
	h := s.hello()
	encodeHello(e, &h)
	c.want = s.encodeState(c, e)
	if err := s.write(c, e, true); err != nil {
		return
	}
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	lastSync := time.Now()
	for {
		select {
		case <-s.closed:
			if s.flush(c, e) == nil {
				encodeBye(e, "producer closing")
				s.write(c, e, true)
			}
			return
		case <-tick.C:
			var devs []store.DeviceInfo
			if s.opts.Devices != nil {
				devs = s.opts.Devices()
			}
			encodeHeartbeat(e, time.Now().UnixMicro(), devs)
			if s.write(c, e, true) != nil {
				return
			}
		case <-c.wake:
		}
		g, err := s.flushGaps(c, e)
		if err == nil {
			err = s.flush(c, e)
		}
		if err != nil {
			return
		}
		c.gapped = c.gapped || g
		// after drops, a fresh snapshot makes the client's state exact again
		if c.gapped && s.opts.Snapshot != nil && s.opts.ResyncInterval >= 0 && time.Since(lastSync) >= s.opts.ResyncInterval {
			resume := s.encodeState(c, e)
			for d, n := range resume {
				c.want[d] = n
			}
			if s.write(c, e, true) != nil {
				return
			}
			c.gapped, lastSync = false, time.Now()
		}
	}
}

// encodeState encodes the producer's state (STACKS and SNAPSHOT) for c and
// returns, per device, the first sequence number it does not reflect.
func (s *Server) encodeState(c *serverClient, e *enc) map[int]uint64 {
	var snap *snapshot.Snapshot
	var resume map[int]uint64
	if s.opts.Snapshot != nil {
		snap, resume = s.opts.Snapshot()
	}
	switch {
	case resume != nil:
	case s.opts.Snapshot == nil && c.joined != nil:
		// no state to start from: the client gets everything queued
		// since it was registered, not only what comes after this
		resume = c.joined
	default:
		s.pubMu.Lock()
		resume = make(map[int]uint64, len(s.seq))
		for d, n := range s.seq {
			resume[d] = n
		}
		s.pubMu.Unlock()
	}
	c.joined = nil
	var segs []snapshot.Segment
	if snap != nil {
		segs = snap.Segments
		var ids []snapshot.StackID
		var stacks []snapshot.Stack
		add := func(id snapshot.StackID) {
			if id <= 0 || c.sent[id] {
				return
			}
			var st snapshot.Stack
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
	out := make(map[int]uint64, len(resume))
	for d, n := range resume {
		out[d] = n
	}
	return out
}

// flushGaps sends a GAP for each device whose entries were dropped for c.
func (s *Server) flushGaps(c *serverClient, e *enc) (gapped bool, err error) {
	s.pubMu.Lock()
	if len(c.lost) == 0 {
		s.pubMu.Unlock()
		return false, nil
	}
	lost := make(map[int]uint64, len(c.lost))
	for d, n := range c.lost {
		lost[d] = n
	}
	clear(c.lost)
	s.pubMu.Unlock()
	devs := make([]int, 0, len(lost))
	for d := range lost {
		devs = append(devs, d)
	}
	slices.Sort(devs)
	for _, d := range devs {
		if next := lost[d]; next > c.want[d] {
			encodeGap(e, d, next-c.want[d], next)
			c.want[d] = next
			gapped = true
		}
	}
	return gapped, s.write(c, e, false)
}

// takeChunk is how many entries a client takes from the queue at a time:
// what it holds while writing them is bounded by it.
const takeChunk = 8192

// take returns the records (or parts of them) after c's cursor, up to
// about takeChunk entries, and advances the cursor.
func (s *Server) take(c *serverClient, out []record) []record {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	q := &s.q
	if c.cur.rec < q.base {
		c.cur = cursor{rec: q.base}
	}
	n := 0
	defer func() { c.idle = len(out) == 0 }()
	for c.cur.rec < q.end() && n < takeChunk {
		r := q.at(c.cur.rec)
		switch {
		case r.entries != nil:
			part := r.entries[c.cur.off:min(len(r.entries), c.cur.off+takeChunk-n)]
			if len(part) > 0 {
				out = append(out, record{device: r.device, first: r.first + uint64(c.cur.off), entries: part})
			}
			n += len(part)
			c.cur.off += len(part)
			if c.cur.off < len(r.entries) {
				return out // the rest next time (or the record grows)
			}
			if c.cur.rec+1 == q.end() {
				return out // the newest record may still grow: stay on it
			}
		case r.ops != nil:
			out = append(out, record{ops: r.ops})
			n += len(r.ops)
		default:
			out = append(out, *r)
		}
		c.cur = cursor{rec: c.cur.rec + 1}
	}
	return out
}

// flush encodes and writes what the queue holds for c.
func (s *Server) flush(c *serverClient, e *enc) error {
	var recs []record
	for {
		recs = s.take(c, recs[:0])
		if len(recs) == 0 {
			return s.write(c, e, true)
		}
		for i := range recs {
			r := recs[i]
			recs[i] = record{} // not pinned by this client while its write waits
			switch {
			case r.gapNext > 0:
				if r.gapNext > c.want[r.device] {
					encodeGap(e, r.device, r.gapNext-c.want[r.device], r.gapNext)
					c.want[r.device] = r.gapNext
				}
			case r.ops != nil:
				for ops := r.ops; len(ops) > 0; {
					n := min(len(ops), 8192)
					encodeOps(e, ops[:n])
					ops = ops[n:]
				}
			default:
				ents, first := r.entries, r.first
				if w := c.want[r.device]; first < w { // already in the snapshot
					skip := min(w-first, uint64(len(ents)))
					ents, first = ents[skip:], first+skip
				} else if first > w {
					// entries dropped for c before it took them
					encodeGap(e, r.device, first-w, first)
					c.gapped = true
				}
				if len(ents) == 0 {
					continue
				}
				s.newStacks(c, e, ents)
				encodeEntries(e, r.device, first, ents)
				c.want[r.device] = first + uint64(len(ents))
			}
			if err := s.write(c, e, false); err != nil {
				return err
			}
		}
	}
}

// newStacks writes a STACKS frame for stack ids c has not seen yet.
func (s *Server) newStacks(c *serverClient, e *enc, ents []snapshot.TraceEntry) {
	if s.opts.Stack == nil {
		return
	}
	var ids []snapshot.StackID
	var stacks []snapshot.Stack
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

// write sends the buffer when it holds ClientBuffer bytes or more (or
// always, with force) and resets it. Each write must finish within
// WriteTimeout (or by the close deadline, once closing); a client that
// does not take it is disconnected.
func (s *Server) write(c *serverClient, e *enc, force bool) error {
	if len(e.b) == 0 || !force && len(e.b) < s.opts.ClientBuffer {
		return nil
	}
	dl := time.Now().Add(s.opts.WriteTimeout)
	if by := s.closeBy.Load(); by != 0 && time.Unix(0, by).Before(dl) {
		dl = time.Unix(0, by)
	}
	c.conn.SetWriteDeadline(dl)
	c.writingSince.Store(time.Now().UnixNano())
	_, err := c.conn.Write(e.b)
	c.writingSince.Store(0)
	if cap(e.b) > 4*s.opts.ClientBuffer {
		e.b = nil
	} else {
		e.b = e.b[:0]
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && s.closeBy.Load() == 0 {
			s.stalled.Add(1)
			s.logf("client #%d disconnected: it took no data for %v", c.id, s.opts.WriteTimeout)
			return errStalled
		}
		return err
	}
	return nil
}
