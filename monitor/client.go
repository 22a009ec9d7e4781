package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator"
)

// ClientState is where a Client is.
type ClientState uint8

const (
	StateConnecting   ClientState = iota // first attempt
	StateConnected                       // handshake done, data flowing
	StateDisconnected                    // the connection ended (Err says why)
	StateReconnecting                    // waiting for the next attempt
	StateClosed                          // Run returned
)

func (s ClientState) String() string {
	return [...]string{"connecting", "connected", "disconnected", "reconnecting", "closed"}[s]
}

// ClientStatus is a Client's state with what is known about the producer.
type ClientStatus struct {
	State   ClientState
	Err     error         // why the last connection ended or failed
	Attempt int           // reconnect attempt number (0 on the first connection)
	Backoff time.Duration // wait before the next attempt (StateReconnecting)
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
}

// Client connects to a producer and feeds a Store.
type Client struct {
	network, address string
	store            *Store
	opts             ClientOptions

	mu     sync.Mutex
	status ClientStatus

	// per producer: sequence bookkeeping survives a reconnect to the same one
	expected map[int]uint64
	producer string
}

// NewClient returns a client for network ("unix" or "tcp") and address
// that delivers into store. Call Run.
func NewClient(network, address string, store *Store, opts ClientOptions) *Client {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(5*time.Second, opts.MinBackoff)
	}
	if opts.Silence <= 0 {
		opts.Silence = 10 * time.Second
	}
	return &Client{network: network, address: address, store: store, opts: opts, expected: map[int]uint64{}}
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
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			c.set(func(s *ClientStatus) { s.State = StateConnecting })
		}
		connected, err := c.session(ctx)
		if ctx.Err() != nil {
			c.set(func(s *ClientStatus) { s.State = StateClosed; s.Err = ctx.Err() })
			return ctx.Err()
		}
		c.set(func(s *ClientStatus) { s.State = StateDisconnected; s.Err = err })
		if c.opts.NoReconnect {
			c.set(func(s *ClientStatus) { s.State = StateClosed })
			return err
		}
		if connected {
			backoff = c.opts.MinBackoff
		}
		wait := backoff
		c.set(func(s *ClientStatus) { s.State = StateReconnecting; s.Attempt = attempt + 1; s.Backoff = wait })
		select {
		case <-ctx.Done():
			c.set(func(s *ClientStatus) { s.State = StateClosed; s.Err = ctx.Err() })
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// session runs one connection; connected reports whether the handshake
// completed.
func (c *Client) session(ctx context.Context) (connected bool, err error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, c.network, c.address)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	fr := &frameReader{r: conn}
	next := func() (byte, []byte, error) {
		conn.SetReadDeadline(time.Now().Add(c.opts.Silence))
		typ, p, err := fr.next()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			err = fmt.Errorf("producer silent for %v", c.opts.Silence)
		}
		return typ, p, err
	}
	typ, p, err := next()
	if err != nil {
		return false, handshakeErr(err)
	}
	if typ != frameHello {
		return false, fmt.Errorf("protocol error: first frame has type %d, want HELLO", typ)
	}
	hello, err := decodeHello(p)
	if err != nil {
		return false, fmt.Errorf("protocol error: HELLO: %w", err)
	}
	id := fmt.Sprintf("%s/%d/%d", hello.Host, hello.PID, hello.StartUS)
	same := id == c.producer
	c.producer = id
	if !same {
		clear(c.expected)
	}

	stacks := map[uint64]allocator.StackID{}
	var buf []allocator.TraceEntry
	var sizeBuf []int64
	haveSnap := false
	for {
		typ, p, err := next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("producer closed the connection")
			}
			return haveSnap, err
		}
		switch typ {
		case frameStacks:
			ws, err := decodeStacks(p)
			if err != nil {
				return haveSnap, fmt.Errorf("protocol error: STACKS: %w", err)
			}
			for _, w := range ws {
				stacks[w.id] = c.store.InternStack(w.frames)
			}
		case frameSnapshot:
			segs, resume, err := decodeSnapshot(p)
			if err != nil {
				return haveSnap, fmt.Errorf("protocol error: SNAPSHOT: %w", err)
			}
			remapSnapshot(&allocator.Snapshot{Segments: segs}, func(id allocator.StackID) allocator.StackID { return stacks[uint64(id)] })
			if haveSnap {
				c.resync(segs, resume)
				continue
			}
			c.startSession(hello, segs, resume, same)
			haveSnap = true
			c.set(func(s *ClientStatus) { s.State = StateConnected; s.Err = nil; s.Hello = hello })
		case frameEntries:
			if !haveSnap {
				return false, errors.New("protocol error: ENTRIES before SNAPSHOT")
			}
			dev, first, ents, sizes, err := decodeEntriesSized(p, buf[:0], sizeBuf[:0])
			if err != nil {
				return true, fmt.Errorf("protocol error: ENTRIES: %w", err)
			}
			buf, sizeBuf = ents, sizes
			exp := c.expected[dev]
			if first < exp { // overlap with what we have
				skip := min(exp-first, uint64(len(ents)))
				ents, sizes = ents[skip:], sizes[skip:]
				first = exp
			} else if first > exp {
				c.store.NoteGap(dev, int64(first-exp))
			}
			for i := range ents {
				ents[i].Frames = stacks[uint64(ents[i].Frames)]
			}
			c.store.AppendSized(dev, ents, sizes)
			c.expected[dev] = first + uint64(len(ents))
			n := uint64(len(ents))
			c.mu.Lock()
			c.status.Entries += n
			c.mu.Unlock()
		case frameOps:
			ops, err := decodeOps(p)
			if err != nil {
				return true, fmt.Errorf("protocol error: OPS: %w", err)
			}
			c.store.AppendOps(ops)
		case frameHeartbeat:
			_, devs, err := decodeHeartbeat(p)
			if err != nil {
				return true, fmt.Errorf("protocol error: HEARTBEAT: %w", err)
			}
			for _, di := range devs {
				if old, ok := c.store.DeviceInfo(di.ID); ok {
					di.Name, di.Streams = old.Name, old.Streams
				}
				c.store.SetDeviceInfo(di)
			}
		case frameGap:
			dev, missed, nextSeq, err := decodeGap(p)
			if err != nil {
				return true, fmt.Errorf("protocol error: GAP: %w", err)
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
		case frameBye:
			reason, _ := decodeBye(p)
			return true, fmt.Errorf("producer said goodbye: %s", reason)
		default:
			return haveSnap, fmt.Errorf("protocol error: unknown frame type %d", typ)
		}
	}
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
func (c *Client) startSession(h *Hello, segs []allocator.Segment, resume map[int]uint64, same bool) {
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
		c.store.StartLive(&allocator.Snapshot{Segments: segs}, h.Devices)
	} else {
		for d := range devs {
			if same && resume[d] > c.expected[d] {
				c.store.NoteGap(d, int64(resume[d]-c.expected[d]))
			}
			c.store.Rebase(d, segs)
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
func (c *Client) resync(segs []allocator.Segment, resume map[int]uint64) {
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
