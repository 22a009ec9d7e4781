package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/store"
)

// ConnState is where a live connection is. The terminal UI's header and
// attach's headless JSON ("connection") say the same words (String).
type ConnState uint8

const (
	ConnNone         ConnState = iota // not a live source (a file, a directory): nothing to say
	ConnConnecting                    // the first attempt is under way
	ConnConnected                     // handshake done, data flowing
	ConnReconnecting                  // a later attempt is under way (Attempt counts them)
	ConnDisconnected                  // no connection: it ended or an attempt failed (Err says why); the next attempt waits Backoff
	ConnClosed                        // Run returned: no attempt follows
)

var connStateWords = [...]string{"", "connecting", "connected", "reconnecting", "disconnected", "closed"}

func (s ConnState) String() string {
	if int(s) < len(connStateWords) {
		return connStateWords[s]
	}
	return "unknown"
}

// ClientStatus is a Client's state with what is known about the producer.
type ClientStatus struct {
	State   ConnState
	Err     error         // why the last connection ended or failed
	Attempt int           // reconnect attempt number (0 on the first connection)
	Backoff time.Duration // wait before the next attempt (ConnDisconnected; 0 when none follows)
	Hello   *Hello        // the producer's handshake (nil before the first)
	Entries uint64        // entries received over all connections
	Missed  uint64        // entries the producer reported dropped (GAP)
	Gaps    int           // GAP records received, counted or of unknown size (missed 0)
	Resyncs int           // fresh snapshots received after drops
	Since   time.Time     // when State was entered
}

// ClientOptions tune a Client.
type ClientOptions struct {
	// OnStatus is called on every state change (from Run's goroutine; it
	// must not block).
	OnStatus func(ClientStatus)
	// MinBackoff and MaxBackoff bound the reconnect delay, which doubles
	// per failed attempt (defaults 100 ms and 5 s).
	MinBackoff, MaxBackoff time.Duration
	// NoReconnect makes Run return after the first connection ends.
	NoReconnect bool
	// Silence is how long the producer may send nothing (heartbeats
	// included) before the connection counts as dead (default 10 s).
	Silence time.Duration
	// ExpectPID, for a Unix socket, is the process that must be at the
	// other end, run by this user (checked with SO_PEERCRED before
	// anything is read); 0: no check. ResolveAddr sets Addr.PID for an
	// address given as a pid.
	ExpectPID int
	// Limits bound what a producer can make this client hold.
	Limits ClientLimits
}

// ClientLimits bound what a producer can make a client hold; a producer
// that goes past one ends the session with an error naming it (a
// LimitError), and the client stops there, keeping what it has. Zero
// fields take the defaults.
type ClientLimits struct {
	Devices     int   // distinct devices, with ids in [0, MaxDeviceID) (default 64)
	Streams     int   // distinct streams per device (default 1024)
	Stacks      int   // distinct stacks (default 1<<20)
	StackFrames int   // frames in one stack (default 1024)
	Strings     int   // distinct compile_context and user_metadata values (default 65536)
	Entries     int64 // trace entries kept, over all connections (default DefaultMaxEntries)
}

// MaxDeviceID bounds device ids on the wire (they index per-device tables).
const MaxDeviceID = 1 << 10

// DefaultMaxEntries is the entries a Client keeps by default: an attach
// holding them peaks near 0.9 GiB RSS (see BENCHMARKS.md, Safety limits).
const DefaultMaxEntries = 4 << 20

func (l ClientLimits) withDefaults() ClientLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.Devices, 64)
	def(&l.Streams, 1024)
	def(&l.Stacks, 1<<20)
	def(&l.StackFrames, 1024)
	def(&l.Strings, 1<<16)
	if l.Entries <= 0 {
		l.Entries = DefaultMaxEntries
	}
	return l
}

// LimitError is a producer going past one of a client's ClientLimits.
type LimitError struct{ What string }

func (e *LimitError) Error() string { return "limit reached: " + e.What }

// GoodbyeError is a connection the producer ended with a goodbye (its
// reason: "finished", "stopping", …).
type GoodbyeError struct{ Reason string }

func (e *GoodbyeError) Error() string { return "producer said goodbye: " + e.Reason }

// PeerError is a Unix socket whose peer is not the process asked for (or
// whose directory is not safe); the client does not retry it.
type PeerError struct{ Msg string }

func (e *PeerError) Error() string { return e.Msg }

// Client connects to a producer and feeds a Store.
type Client struct {
	network, address string
	store            *store.Store
	opts             ClientOptions

	mu     sync.Mutex
	status ClientStatus

	// per producer: sequence bookkeeping survives a reconnect to the same one
	expected map[int]uint64
	producer string

	// what the Store holds, against opts.Limits (kept over reconnects,
	// as the Store keeps it)
	devices  map[int]bool
	streams  map[int]map[uint64]bool
	maxStack snapshot.StackID

	ra *readAhead // the current session's (guarded by mu)
}

// NewClient returns a client for network ("unix" or "tcp") and address
// that delivers into store. Call Run.
func NewClient(network, address string, store *store.Store, opts ClientOptions) *Client {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	if opts.Silence <= 0 {
		opts.Silence = 10 * time.Second
	}
	opts.Limits = opts.Limits.withDefaults()
	return &Client{network: network, address: address, store: store, opts: opts, expected: map[int]uint64{},
		devices: map[int]bool{}, streams: map[int]map[uint64]bool{}}
}

// Status returns the current status.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

func (c *Client) set(f func(*ClientStatus)) {
	c.mu.Lock()
	prev := c.status.State
	f(&c.status)
	if c.status.State != prev {
		c.status.Since = time.Now()
	}
	st := c.status
	c.mu.Unlock()
	if c.opts.OnStatus != nil {
		c.opts.OnStatus(st)
	}
}

// Run connects, streams into the Store and reconnects with backoff until
// ctx is done (or, with NoReconnect, until the first connection ends). It
// returns the last connection error, or ctx.Err().
func (c *Client) Run(ctx context.Context) error {
	backoff := c.opts.MinBackoff
	var ended error // why the last connection that was up ended
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			c.set(func(s *ClientStatus) { s.State = ConnConnecting })
		} else {
			c.set(func(s *ClientStatus) { s.State = ConnReconnecting; s.Backoff = 0 })
		}
		connected, err := c.session(ctx)
		if ctx.Err() != nil {
			c.set(func(s *ClientStatus) { s.State = ConnClosed; s.Err = ctx.Err() })
			return ctx.Err()
		}
		shown := err
		if connected {
			ended = err
		} else if ended != nil && err != nil {
			// a retry's dial error alone ("no such file") would hide why
			// the data stopped (a goodbye, a dropped connection)
			shown = fmt.Errorf("%w; reconnecting: %w", ended, err)
		}
		c.set(func(s *ClientStatus) { s.State = ConnDisconnected; s.Err = shown })
		var le *LimitError
		var pe *PeerError
		if c.opts.NoReconnect || errors.As(err, &le) || errors.As(err, &pe) {
			c.set(func(s *ClientStatus) { s.State = ConnClosed })
			return err
		}
		if connected {
			backoff = c.opts.MinBackoff
		}
		wait := backoff
		c.set(func(s *ClientStatus) { s.Attempt = attempt + 1; s.Backoff = wait }) // still disconnected, waiting
		select {
		case <-ctx.Done():
			c.set(func(s *ClientStatus) { s.State = ConnClosed; s.Err = ctx.Err() })
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// readBuffer is the kernel receive buffer asked for a TCP connection
// (capped by net.core.rmem_max).
const readBuffer = 4 << 20

// session runs one connection: dial (and check the peer), handshake, then
// the frames, read ahead by their own goroutine, until the connection
// ends; connected reports whether the handshake completed.
func (c *Client) session(ctx context.Context) (connected bool, err error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if c.opts.ExpectPID > 0 && c.network == "unix" {
		if err := checkPeer(conn, c.opts.ExpectPID); err != nil {
			return false, err
		}
	}
	rc := &readCounter{Conn: conn}
	src := &frameSource{conn: conn, rc: rc, fr: &frameReader{r: bufio.NewReaderSize(rc, 256<<10)}, silence: c.opts.Silence}
	s := &sessionState{c: c}
	defer s.flushOps()
	if err := s.handshake(src); err != nil {
		return false, err
	}
	ra := c.startReadAhead(src)
	defer ra.stop()
	more := true
	var f readFrame
	for {
		// OPS are handed to the Store in batches: where the reading had
		// to wait for the network after the last frame, or once many are held
		if !more || len(s.pendingOps) >= 1<<16 {
			s.flushOps()
		}
		ra.done(f) // the previous frame is processed
		f, _ = ra.take()
		more = f.more
		if f.err != nil {
			err := f.err
			if errors.Is(err, io.EOF) {
				err = errors.New("producer closed the connection")
			}
			return s.haveSnap, err
		}
		if connected, err := s.frame(&f); err != nil {
			return connected, err
		}
	}
}

// dial opens the connection.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, c.network, c.address)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		// room in the kernel for what arrives while this process is not
		// scheduled (a Unix socket's room is the producer's send buffer)
		tc.SetReadBuffer(readBuffer)
	}
	return conn, nil
}

// frameSource reads a connection's frames, each within the silence a
// producer is allowed; after the handshake only the read-ahead goroutine
// calls next.
type frameSource struct {
	conn    net.Conn
	rc      *readCounter // conn as fr reads it
	fr      *frameReader
	silence time.Duration
}

// readCounter is a connection that remembers its last read: how many
// bytes it gave and how many were asked for (Note [read pacing]).
type readCounter struct {
	net.Conn
	got, asked int
}

func (r *readCounter) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.got, r.asked = n, len(p)
	return n, err
}

// caughtUp reports whether the last read found the socket holding less
// than half the room it was given: the producer is not ahead.
func (s *frameSource) caughtUp() bool { return s.rc.got < s.rc.asked/2 }

// next reads a frame; a timeout says whether the producer went silent
// between frames or stalled inside one.
func (s *frameSource) next() (byte, []byte, error) {
	s.conn.SetReadDeadline(time.Now().Add(s.silence))
	typ, p, err := s.fr.next()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if s.fr.partial > 0 {
			err = fmt.Errorf("producer stalled for %v inside a frame (%d bytes of it received); npumon hung up", s.silence, s.fr.partial)
		} else {
			err = fmt.Errorf("producer silent for %v (not even a heartbeat); npumon hung up", s.silence)
		}
	}
	return typ, p, err
}

// buffered reports whether the next frame's header is already buffered.
func (s *frameSource) buffered() bool { return s.fr.r.(*bufio.Reader).Buffered() >= 5 }

// sessionState is what one connection's frames build on: the producer's
// handshake, its stack ids, the decode buffers and the OPS not yet handed
// to the Store.
type sessionState struct {
	c          *Client
	hello      *Hello
	same       bool // the same producer as the last connection's
	stacks     stackMap
	buf        []snapshot.TraceEntry
	sizeBuf    []int64
	haveSnap   bool
	pendingOps []store.Op
}

func (s *sessionState) flushOps() {
	if len(s.pendingOps) > 0 {
		s.c.store.AppendOps(s.pendingOps)
		s.pendingOps = s.pendingOps[:0]
	}
}

// handshake reads and checks the producer's HELLO; a producer other than
// the last connection's starts its sequence bookkeeping afresh.
func (s *sessionState) handshake(src *frameSource) error {
	c := s.c
	typ, p, err := src.next()
	if err != nil {
		return handshakeErr(err)
	}
	if typ != frameHello {
		return fmt.Errorf("protocol error: first frame has type %d, want HELLO", typ)
	}
	hello, err := decodeHello(p)
	if err != nil {
		return fmt.Errorf("protocol error: HELLO: %w", err)
	}
	if err := c.checkHello(hello); err != nil {
		return err
	}
	id := fmt.Sprintf("%s/%d/%d", hello.Host, hello.PID, hello.StartUS)
	s.hello, s.same = hello, id == c.producer
	c.producer = id
	if !s.same {
		clear(c.expected)
	}
	return nil
}

// readPace is how long the reading goroutine waits before a read that
// would wait on the socket, once readPaceBytes came since it last did
// (Note [read pacing]); variables for tests.
//
// Note [read pacing]: at a million entries a second a producer writes a
// frame every few hundred microseconds. Read as they come, each frame
// costs the reading goroutine a wake-up from the network poller and the
// Store goroutine another; on a virtual machine those context switches
// were the largest part of attach's CPU (perf: 28-35 % of its samples in
// the kernel, under task switches, futex wake-ups and sysmon's sleeps).
// Pausing 8 ms once the buffered bytes are used up batches them: the
// socket and the producer's queue hold the frames meanwhile (about 240 KB
// at that rate, against a 256 KiB read buffer and the 4 MiB socket buffer
// the producer asks for), and a live view 8 ms later is no later to the
// eye (it redraws every 100 ms). A slow stream is not paused: only after
// readPaceBytes have come since the last pause, so a producer that sends
// a frame now and then is read at once. Nor is a backlog: a read that
// filled half its buffer or more says the socket holds more, which is
// read at once (pausing there would cap the rate at a buffer a pause).
var (
	readPace            = 8 * time.Millisecond
	readPaceBytes int64 = 64 << 10
)

// startReadAhead starts the goroutine that reads frames ahead of their
// processing, so the socket keeps draining while a batch is stored (and
// while queries hold the Store): the producer's bounded queue then absorbs
// only what this process cannot take at all. At most readAheadBytes wait
// (readahead.go); each frame is read into a buffer of the read-ahead's
// pool, and an ENTRIES frame may be decoded on the way (predecode). The
// last frame queued carries the error that ended the reading. Call stop.
func (c *Client) startReadAhead(src *frameSource) *readAhead {
	ra := newReadAhead()
	src.fr.alloc = ra.alloc
	c.mu.Lock()
	c.ra = ra
	c.mu.Unlock()
	go func() {
		defer crash.Recover()
		var paused int64 // the stream offset at the last pause
		for {
			src.fr.buf = ra.buffer()
			typ, p, err := src.next()
			f := readFrame{typ: typ, p: p, err: err, more: src.buffered()}
			ra.place(&f)
			ra.predecode(&f)
			if !ra.put(f) || err != nil {
				return
			}
			if !f.more && readPace > 0 && src.fr.off-paused >= readPaceBytes && src.caughtUp() {
				// Note [read pacing]: the buffer is drained, so the next
				// read waits on the socket; waiting a moment first lets a
				// fast producer's frames gather, read in one go and
				// handed on in one wake-up.
				paused = src.fr.off
				time.Sleep(readPace)
			}
		}
	}()
	return ra
}

// frame processes one frame after the handshake. A non-nil error ends the
// session, connected saying whether it counts as having been up.
func (s *sessionState) frame(f *readFrame) (connected bool, err error) {
	p := f.p
	switch f.typ {
	case frameStacks:
		err := s.onStacks(p)
		return s.haveSnap, err
	case frameSnapshot:
		err := s.onSnapshot(p) // a failed first SNAPSHOT leaves haveSnap false
		return s.haveSnap, err
	case frameEntries:
		if !s.haveSnap {
			return false, errors.New("protocol error: ENTRIES before SNAPSHOT")
		}
		return true, s.onEntries(f)
	case frameOps:
		ops, err := decodeOps(p)
		if err != nil {
			return true, fmt.Errorf("protocol error: OPS: %w", err)
		}
		s.pendingOps = append(s.pendingOps, ops...)
		return true, nil
	case frameHeartbeat:
		return true, s.onHeartbeat(p)
	case frameGap:
		return true, s.onGap(p)
	case frameBye:
		reason, _ := decodeBye(p)
		return true, &GoodbyeError{Reason: reason}
	default:
		return s.haveSnap, fmt.Errorf("protocol error: unknown frame type %d", f.typ)
	}
}

// onStacks interns a STACKS frame's stacks, mapping the producer's ids.
func (s *sessionState) onStacks(p []byte) error {
	c := s.c
	ws, err := decodeStacks(p, c.opts.Limits.StackFrames)
	if err != nil {
		return fmt.Errorf("protocol error: STACKS: %w", err)
	}
	if s.stacks.n+len(ws) > 2*c.opts.Limits.Stacks {
		return &LimitError{fmt.Sprintf("the producer defined more than %d stack ids", 2*c.opts.Limits.Stacks)}
	}
	for _, w := range ws {
		id := c.store.InternStack(w.frames)
		if id > c.maxStack {
			if int(id) > c.opts.Limits.Stacks {
				return &LimitError{fmt.Sprintf("more than %d distinct stacks", c.opts.Limits.Stacks)}
			}
			c.maxStack = id
		}
		s.stacks.set(w.id, id)
	}
	return nil
}

// onSnapshot installs a SNAPSHOT: the first starts the session (the
// connection is up from here), a later one is a resync after drops.
func (s *sessionState) onSnapshot(p []byte) error {
	c := s.c
	segs, resume, err := decodeSnapshot(p)
	if err != nil {
		return fmt.Errorf("protocol error: SNAPSHOT: %w", err)
	}
	if err := c.checkSnapshot(segs, resume); err != nil {
		return err
	}
	(&snapshot.Snapshot{Segments: segs}).RemapStacks(func(id snapshot.StackID) snapshot.StackID { return s.stacks.get(uint64(id)) })
	if s.haveSnap {
		c.resync(segs, resume)
		return nil
	}
	c.startSession(s.hello, segs, resume, s.same)
	s.haveSnap = true
	hello := s.hello
	c.set(func(st *ClientStatus) { st.State = ConnConnected; st.Err = nil; st.Hello = hello })
	return nil
}

// onEntries stores an ENTRIES frame's trace entries, past what is already
// held, noting a gap where the sequence jumps.
func (s *sessionState) onEntries(f *readFrame) error {
	c := s.c
	var (
		dev   int
		first uint64
		ents  []snapshot.TraceEntry
		sizes []int64
	)
	if d := f.dec; d != nil { // decoded by the reading goroutine
		dev, first, ents, sizes = d.dev, d.first, d.ents, d.sizes
	} else {
		var err error
		dev, first, ents, sizes, err = decodeEntriesNamed(f.p, s.buf[:0], s.sizeBuf[:0], c.store.Actions(), c.store.Texts())
		if err != nil {
			return fmt.Errorf("protocol error: ENTRIES: %w", err)
		}
		s.buf, s.sizeBuf = ents, sizes
	}
	if err := c.checkEntries(dev, ents); err != nil {
		return err
	}
	exp := c.expected[dev]
	if first < exp { // overlap with what we have
		skip := min(exp-first, uint64(len(ents)))
		ents, sizes = ents[skip:], sizes[skip:]
		first = exp
	} else if first > exp {
		c.store.NoteGap(dev, int64(first-exp))
	}
	for i := range ents {
		ents[i].Frames = s.stacks.get(uint64(ents[i].Frames))
	}
	c.store.AppendSized(dev, ents, sizes)
	c.expected[dev] = first + uint64(len(ents))
	n := uint64(len(ents))
	c.mu.Lock()
	c.status.Entries += n
	c.mu.Unlock()
	return nil
}

// onHeartbeat updates the devices' info from a HEARTBEAT (keeping the
// names and streams the Store already knows).
func (s *sessionState) onHeartbeat(p []byte) error {
	c := s.c
	_, devs, err := decodeHeartbeat(p)
	if err != nil {
		return fmt.Errorf("protocol error: HEARTBEAT: %w", err)
	}
	for _, di := range devs {
		if err := c.checkDevice(di.ID); err != nil {
			return err
		}
	}
	for _, di := range devs {
		if old, ok := c.store.DeviceInfo(di.ID); ok {
			di.Name, di.Streams = old.Name, old.Streams
		}
		c.store.SetDeviceInfo(di)
	}
	return nil
}

// onGap notes the entries a GAP says the producer dropped.
func (s *sessionState) onGap(p []byte) error {
	c := s.c
	dev, missed, nextSeq, err := decodeGap(p)
	if err != nil {
		return fmt.Errorf("protocol error: GAP: %w", err)
	}
	if err := c.checkDevice(dev); err != nil {
		return err
	}
	switch {
	case missed == 0: // an unknown number (the producer's source lost them)
		c.store.NoteGap(dev, 0)
		c.expected[dev] = max(c.expected[dev], nextSeq)
		c.mu.Lock()
		c.status.Gaps++
		c.mu.Unlock()
	case nextSeq > c.expected[dev]:
		c.store.NoteGap(dev, int64(missed))
		c.expected[dev] = nextSeq
		c.mu.Lock()
		c.status.Missed += missed
		c.status.Gaps++
		c.mu.Unlock()
	}
	return nil
}

// denseStackIDs: producer stack ids below it are mapped through a slice
// (grown as ids are defined: at most 4 MiB), larger ones through a map.
const denseStackIDs = 1 << 20

// stackMap maps a producer's stack ids to the Store's.
type stackMap struct {
	dense  []snapshot.StackID // Store id + 1; 0: not defined
	sparse map[uint64]snapshot.StackID
	n      int // ids defined
}

// get returns the Store's id for a producer's id (0 when not defined).
func (m *stackMap) get(id uint64) snapshot.StackID {
	if id < uint64(len(m.dense)) {
		if v := m.dense[id]; v > 0 {
			return v - 1
		}
		return 0
	}
	if id < denseStackIDs {
		return 0
	}
	return m.sparse[id]
}

func (m *stackMap) set(id uint64, v snapshot.StackID) {
	if id >= denseStackIDs {
		if m.sparse == nil {
			m.sparse = map[uint64]snapshot.StackID{}
		}
		if _, ok := m.sparse[id]; !ok {
			m.n++
		}
		m.sparse[id] = v
		return
	}
	if id >= uint64(len(m.dense)) {
		m.dense = slices.Grow(m.dense, int(id)+1-len(m.dense))[:id+1]
	}
	if m.dense[id] == 0 {
		m.n++
	}
	m.dense[id] = v + 1
}

func handshakeErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("producer closed the connection before the handshake")
	}
	return fmt.Errorf("handshake: %w", err)
}

// startSession installs the producer's snapshot: a fresh Store starts live
// from it; a Store that already holds logs (a reconnect) is rebased so that
// its history stays, with a gap for what was missed in between.
func (c *Client) startSession(h *Hello, segs []snapshot.Segment, resume map[int]uint64, same bool) {
	devs := map[int]bool{}
	for _, d := range h.Devices {
		devs[d.ID] = true
	}
	for i := range segs {
		devs[segs[i].Device] = true
	}
	for d := range resume {
		devs[d] = true
	}
	fresh := true
	for d := range devs {
		if c.store.Len(d) > 0 {
			fresh = false
		}
	}
	if fresh {
		c.store.StartLive(&snapshot.Snapshot{Segments: segs}, h.Devices)
	} else {
		for d := range devs {
			if same && resume[d] > c.expected[d] {
				c.store.NoteGap(d, int64(resume[d]-c.expected[d]))
			}
			if same {
				c.store.Rebase(d, segs)
			} else { // another process: a restart marker on the timeline
				c.store.Restart(d, segs, h.PID)
			}
		}
		for _, di := range h.Devices {
			c.store.SetDeviceInfo(di)
		}
	}
	for d := range devs {
		c.expected[d] = resume[d]
	}
}

// resync installs a mid-stream SNAPSHOT (sent after drops): the devices'
// state is replaced from here on; the GAP records already mark the hole.
func (c *Client) resync(segs []snapshot.Segment, resume map[int]uint64) {
	devs := map[int]bool{}
	for i := range segs {
		devs[segs[i].Device] = true
	}
	for d := range resume {
		devs[d] = true
	}
	for d := range devs {
		c.store.Rebase(d, segs)
		if r, ok := resume[d]; ok {
			c.expected[d] = r
		}
	}
	c.mu.Lock()
	c.status.Resyncs++
	c.mu.Unlock()
}

// checkPeer verifies that the process at the other end of a Unix socket
// is pid, run by this user: a socket in a directory another user could
// write to, or a recycled pid, must not feed this client.
func checkPeer(conn net.Conn, pid int) error {
	ppid, puid, err := peerCred(conn)
	if err != nil {
		return &PeerError{fmt.Sprintf("cannot verify the producer behind the socket: %v", err)}
	}
	if puid != os.Getuid() {
		return &PeerError{fmt.Sprintf("the socket for pid %d is served by uid %d, not by this user (uid %d): refusing it", pid, puid, os.Getuid())}
	}
	if ppid != pid {
		return &PeerError{fmt.Sprintf("the socket for pid %d is served by pid %d: refusing it", pid, ppid)}
	}
	return nil
}

// checkDevice admits a device id within the limits.
func (c *Client) checkDevice(id int) error {
	if c.devices[id] {
		return nil
	}
	if id < 0 || id >= MaxDeviceID {
		return fmt.Errorf("protocol error: device id %d out of range (0..%d)", id, MaxDeviceID-1)
	}
	if len(c.devices) >= c.opts.Limits.Devices {
		return &LimitError{fmt.Sprintf("more than %d devices", c.opts.Limits.Devices)}
	}
	c.devices[id] = true
	return nil
}

func (c *Client) checkHello(h *Hello) error {
	if len(h.Devices) > c.opts.Limits.Devices {
		return &LimitError{fmt.Sprintf("HELLO lists %d devices, more than %d", len(h.Devices), c.opts.Limits.Devices)}
	}
	for _, d := range h.Devices {
		if err := c.checkDevice(d.ID); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) checkSnapshot(segs []snapshot.Segment, resume map[int]uint64) error {
	for i := range segs {
		if err := c.checkDevice(segs[i].Device); err != nil {
			return err
		}
		if err := c.checkStream(segs[i].Device, segs[i].Stream); err != nil {
			return err
		}
	}
	for d := range resume {
		if err := c.checkDevice(d); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) checkStream(dev int, stream uint64) error {
	m := c.streams[dev]
	if m[stream] {
		return nil
	}
	if m == nil {
		m = map[uint64]bool{}
		c.streams[dev] = m
	}
	if len(m) >= c.opts.Limits.Streams {
		return &LimitError{fmt.Sprintf("more than %d streams on device %d", c.opts.Limits.Streams, dev)}
	}
	m[stream] = true
	return nil
}

func (c *Client) checkEntries(dev int, ents []snapshot.TraceEntry) error {
	if err := c.checkDevice(dev); err != nil {
		return err
	}
	// what the Store holds in detail: a retention window thins the rest
	if held := c.store.Held(); held+int64(len(ents)) > c.opts.Limits.Entries {
		return &LimitError{fmt.Sprintf("%d entries kept, the most this client keeps (raise it with --max-entries)", held)}
	}
	lastStream, checked := uint64(0), false
	for i := range ents {
		t := &ents[i]
		if !checked || t.Stream != lastStream {
			if err := c.checkStream(dev, t.Stream); err != nil {
				return err
			}
			lastStream, checked = t.Stream, true
		}
	}
	// decoding interned the entries' strings in the Store's table
	if n := c.store.Texts().Len() - 1; n > c.opts.Limits.Strings {
		return &LimitError{fmt.Sprintf("more than %d distinct compile_context/user_metadata values", c.opts.Limits.Strings)}
	}
	return nil
}
