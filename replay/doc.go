// Package replay reads saved memory snapshots (torch / torch_npu
// `_dump_snapshot` pickles of every schema version, and JSON of the same
// shape) into the allocator data model, and defines the timeline semantics
// (docs/timeline.md) that stats, the Store and the TUI share: the state
// before the first trace entry, the active and reserved series, and the
// state after any entry reconstructed by undoing later entries.
package replay
