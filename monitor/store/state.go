package store

import (
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// The segment map a device log implies at one position — the mutable head
// the Store rolls forward and the frozen checkpoints it seeks from — is
// replay/tiling's, the same implementation replay's Timeline undoes with:
// rolling forward from Timeline.Initial reaches the state undoing
// backwards from the final state gives (docs/timeline.md).
type (
	segState   = tiling.State
	checkpoint = tiling.Checkpoint
	entryView  = tiling.Entry
	overrides  = tiling.Overrides
)

// stateFromSegments loads segments (with blocks) as a mutable state,
// keeping only live blocks.
func stateFromSegments(segs []snapshot.Segment) *segState { return tiling.FromSegments(segs) }
