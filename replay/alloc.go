package replay

import "github.com/npumon/npumon/allocator/snapshot"

// Alloc is one live allocation: what a holders query returns (the monitor
// Store's LiveAtSeq, replay/explain's Walker) and what explain groups.
type Alloc struct {
	Addr   uint64
	Size   int64 // bytes as the trace counts them (requested)
	Frames snapshot.StackID
	// Forward is the forward traceback of an allocation made in backward
	// (the entry's "forward_frames"), NoStack when it has none.
	Forward snapshot.StackID
	Stream  uint64
	Pending bool // freed by the caller, still waiting on other streams
	// Born is the trace index of the entry that allocated it, -1 for an
	// allocation live before the trace; BornTime that entry's epoch µs (0
	// when unknown).
	Born     int
	BornTime int64
}
