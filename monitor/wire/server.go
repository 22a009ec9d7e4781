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
	// clients and held encoded (default DefaultQueueBytes: about 2 million
	// entries without strings, 2 s at 1 M entries/s). A client that falls
	// further behind loses the oldest: a GAP follows, then a fresh snapshot
	// (ResyncInterval).
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
	// Backlog is the bytes of the queue the furthest client behind has
	// not taken yet (it drops entries past QueueBytes).
	Backlog int
}

// Server serves an allocator's trace to npumon clients. Publish never
// waits for a client: entries are encoded once into a bounded queue shared
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
	pe      enc      // encodes published entries into the queue
	marks   []uint64 // per stack id below denseStackIDs: 1 + the last record that listed it
	markMap map[snapshot.StackID]uint64

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

// record is one item of the shared queue, encoded once for every client:
// entries of a device (first is the sequence number of the first; body
// what an ENTRIES frame holds after its count), a loss upstream (gapNext >
// 0: the device's sequence jumps to gapNext), or ops (body: whole OPS
// frames). Encoded, an entry of the live pattern takes ≈ 13 bytes instead
// of the 80 of a TraceEntry, so the same QueueBytes rides out a client's
// stall six times as long.
type record struct {
	device  int
	first   uint64
	n       int                // entries (or ops) in body
	body    []byte             // grows only until a client takes the record
	last    int64              // time of the body's last entry: the next one's delta is from it
	stacks  []snapshot.StackID // the distinct stack ids the entries name
	gapNext uint64
	ops     bool
	sealed  bool // a client took it: it is never written again
	bytes   int  // memory held, as recBytes counts it
}

func (r *record) size() int { return max(r.n, 1) }

// recordBytes is what a queue record holds besides its slices.
const recordBytes = int(unsafe.Sizeof(record{}))

func recBytes(r *record) int {
	return recordBytes + cap(r.body) + cap(r.stacks)*int(unsafe.Sizeof(snapshot.StackID(0)))
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
	back := s.q.end()
	for c := range s.clients {
		back = min(back, max(c.cur, s.q.base))
	}
	backlog := 0
	for i := back; i < s.q.end(); i++ {
		backlog += s.q.at(i).bytes
	}
	s.pubMu.Unlock()
	return ServerStats{Clients: n, Published: s.published.Load(), Dropped: s.dropped.Load(),
		Refused: s.refused.Load(), Stalled: s.stalled.Load(), Backlog: backlog}
}

// Published returns the number of entries published for device so far,
// i.e. the sequence number the next one gets.
func (s *Server) Published(device int) uint64 {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	return s.seq[device]
}

// maxRecord caps the entries merged into one queue record (and one
// ENTRIES frame), so that eviction frees memory in small steps;
// maxRecordBody caps its bytes (entries with strings).
const (
	maxRecord     = 4096
	maxRecordBody = 256 << 10
)

// Publish hands entries of device to every client. It never waits for a
// client: the entries are encoded once into the shared queue. entries may
// be reused after Publish returns.
func (s *Server) Publish(device int, entries []snapshot.TraceEntry) {
	if len(entries) == 0 {
		return
	}
	s.pubMu.Lock()
	first := s.seq[device]
	s.seq[device] = first + uint64(len(entries))
	if len(s.clients) > 0 {
		s.queueEntriesLocked(device, first, entries)
		s.trimLocked()
		s.wakeAllLocked()
	}
	s.pubMu.Unlock()
	s.published.Add(uint64(len(entries)))
}

// queueEntriesLocked encodes entries into the newest record while no client
// has taken it and it has room, else into new ones.
func (s *Server) queueEntriesLocked(device int, first uint64, entries []snapshot.TraceEntry) {
	q := &s.q
	s.pe.actions, s.pe.texts = s.opts.Actions, s.opts.Texts
	for len(entries) > 0 {
		var r *record
		if n := len(q.recs); n > q.h {
			if last := &q.recs[n-1]; !last.sealed && !last.ops && last.gapNext == 0 && last.device == device &&
				last.first+uint64(last.n) == first && last.n < maxRecord && len(last.body) < maxRecordBody {
				r = last
			}
		}
		if r == nil {
			// room for what a writer that keeps up takes at once, yet a
			// record of a few entries holds little memory (its capacity
			// counts against QueueBytes); the body doubles as entries merge
			s.appendRecLocked(record{device: device, first: first,
				body: make([]byte, 0, min(64<<10, max(256, 32*len(entries))))})
			r = &q.recs[len(q.recs)-1]
		}
		k := min(len(entries), maxRecord-r.n, 512)
		before, held := r.bytes, r.size()
		s.pe.b = r.body
		r.last = encodeEntryBodies(&s.pe, entries[:k], nil, r.last)
		r.body, s.pe.b = s.pe.b, nil
		if s.opts.Stack != nil {
			s.listStacksLocked(r, q.end(), entries[:k])
		}
		r.n += k
		r.bytes = recBytes(r)
		q.bytes += r.bytes - before
		q.held += r.size() - held
		first += uint64(k)
		entries = entries[k:]
	}
}

// listStacksLocked adds to r (record serial-1) the stack ids of entries it
// does not list yet: a client sends the ones it has not seen in a STACKS
// frame before the record's entries.
func (s *Server) listStacksLocked(r *record, serial uint64, entries []snapshot.TraceEntry) {
	prev := snapshot.StackID(0)
	for i := range entries {
		id := entries[i].Frames
		if id <= 0 || id == prev {
			continue
		}
		prev = id
		if id < denseStackIDs {
			if int(id) >= len(s.marks) {
				s.marks = slices.Grow(s.marks, int(id)+1-len(s.marks))[:int(id)+1]
			}
			if s.marks[id] == serial {
				continue
			}
			s.marks[id] = serial
		} else {
			if s.markMap == nil {
				s.markMap = map[snapshot.StackID]uint64{}
			}
			if s.markMap[id] == serial {
				continue
			}
			s.markMap[id] = serial
		}
		r.stacks = append(r.stacks, id)
	}
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
		e := &enc{}
		for rest := ops; len(rest) > 0; {
			k := min(len(rest), 8192)
			encodeOps(e, rest[:k])
			rest = rest[k:]
		}
		s.pushLocked(record{ops: true, n: len(ops), body: e.b})
	}
	s.pubMu.Unlock()
}

func (s *Server) pushLocked(r record) {
	s.appendRecLocked(r)
	s.trimLocked()
	s.wakeAllLocked()
}

// appendRecLocked adds r to the queue as its newest record.
func (s *Server) appendRecLocked(r record) {
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
}

// trimLocked drops the oldest records while the queue holds too much; a
// client that had not taken them yet loses them (counted, and a GAP is
// sent to it).
func (s *Server) trimLocked() {
	q := &s.q
	for (q.bytes > s.opts.QueueBytes || s.opts.QueueEntries > 0 && q.held > s.opts.QueueEntries) && len(q.recs)-q.h > 1 {
		r := &q.recs[q.h]
		for c := range s.clients {
			if c.cur != q.base {
				continue
			}
			if r.gapNext == 0 && !r.ops {
				if n := r.n; n > 0 {
					c.lost[r.device] = max(c.lost[r.device], r.first+uint64(n))
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
			c.cur = q.base + 1
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
				sent: map[snapshot.StackID]bool{}, cur: s.q.end(), idle: true, joined: maps.Clone(s.seq)}
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
	cur         uint64         // the next record it takes
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

// takeChunk is about how many entries a client takes from the queue at a
// time: what it holds while writing them is bounded by it.
const takeChunk = 8192

// take returns the records after c's cursor, up to about takeChunk entries,
// and advances the cursor. The records taken are sealed: shared by every
// client from then on, they are never written again.
func (s *Server) take(c *serverClient, out []record) []record {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	q := &s.q
	c.cur = max(c.cur, q.base)
	n := 0
	for c.cur < q.end() && n < takeChunk {
		r := q.at(c.cur)
		r.sealed = true
		out = append(out, *r)
		n += r.size()
		c.cur++
	}
	c.idle = len(out) == 0
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
			case r.ops:
				e.b = append(e.b, r.body...)
			default:
				body, first, n := r.body, r.first, uint64(r.n)
				if w := c.want[r.device]; first < w { // already in the snapshot
					skip := min(w-first, n)
					if skip == n {
						continue
					}
					var err error
					if body, err = cutEntryBodies(body, int(skip)); err != nil {
						return fmt.Errorf("queued entries: %w", err) // a bug: the server encoded them
					}
					first, n = first+skip, n-skip
				} else if first > w {
					// entries dropped for c before it took them
					encodeGap(e, r.device, first-w, first)
					c.gapped = true
				}
				s.newStacks(c, e, r.stacks)
				off := e.frame(frameEntries)
				e.iv(int64(r.device))
				e.uv(first)
				e.uv(n)
				e.b = append(e.b, body...)
				e.end(off)
				c.want[r.device] = first + n
			}
			if err := s.write(c, e, false); err != nil {
				return err
			}
		}
	}
}

// newStacks writes a STACKS frame for the stack ids c has not seen yet.
func (s *Server) newStacks(c *serverClient, e *enc, ids []snapshot.StackID) {
	if s.opts.Stack == nil {
		return
	}
	var fresh []snapshot.StackID
	var stacks []snapshot.Stack
	for _, id := range ids {
		if c.sent[id] {
			continue
		}
		c.sent[id] = true
		fresh, stacks = append(fresh, id), append(stacks, s.opts.Stack(id))
	}
	if len(fresh) > 0 {
		encodeStacks(e, fresh, stacks)
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
