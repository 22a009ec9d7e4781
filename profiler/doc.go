// Package profiler records op ranges, marks, steps and memory events in the
// torch_npu profiler on-disk formats (FRAMEWORK TLV files, *_ascend_pt
// directories, ASCEND_PROFILER_OUTPUT CSV/JSON) and reads real profiler
// directories back — finished, analysed or still being written, including the
// SQLite exports (ascend_pytorch_profiler*.db, msprof*.db) — as op and memory
// tables keyed by epoch time.
//
// Time: FRAMEWORK files hold raw clock values (CLOCK_MONOTONIC_RAW ns or the
// system counter); TimeBase converts them to epoch nanoseconds. Read results
// carry epoch ns (int64) with µs accessors; nothing is float64 µs.
//
// The formats are described in docs/reference/profiler-format.md; comments cite
// its sections as "docs/reference/profiler-format.md §n".
package profiler
