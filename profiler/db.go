package profiler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/npumon/npumon/internal/safefile"
)

// SQLite exports (docs/reference/profiler-format.md §7): torch_npu's
// ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler[_{rank}].db (export_type db)
// and CANN's msprof_*.db. Tables and columns are found by name, so older and
// newer layouts read as long as the columns a table needs exist; name columns
// are ids into STRING_IDS. The driver is modernc.org/sqlite (pure Go, no cgo).

// SourceDB is Data.Source for a SQLite export.
const SourceDB = "db"

// dbInvalidID is torch_npu's DB_INVALID_VALUE: "no string" in a name column.
const dbInvalidID = 4294967295

// PYTORCH_API.type values (ENUM_API_TYPE,
// docs/reference/profiler-format.md §7.1).
const (
	apiTorchOp     = 50001
	apiTaskQueue   = 50002
	apiPythonTrace = 50003
	apiMstxOp      = 50004
)

// sqliteMagic opens every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// IsDBName reports whether a file name is one of the SQLite exports ReadDir
// reads: ascend_pytorch_profiler[_{rank}].db or msprof_*.db.
func IsDBName(name string) bool {
	return strings.HasSuffix(name, ".db") &&
		(strings.HasPrefix(name, "ascend_pytorch_profiler") || strings.HasPrefix(name, "msprof"))
}

// findDB returns the SQLite export in dir, "" if none: torch_npu's own
// database before a CANN msprof one, the first by name among equals.
func findDB(dir string) string {
	for _, pat := range []string{"ascend_pytorch_profiler*.db", "msprof*.db"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		sort.Strings(m)
		for _, p := range m {
			if fileExists(p) {
				return p
			}
		}
	}
	return ""
}

// ReadDB reads a torch_npu or CANN msprof SQLite export into Data (Source
// SourceDB): ops from PYTORCH_API (torch ops and mstx marks; task-queue rows
// become Queue) or, in a CANN-only export, from CANN_API and MSTX_EVENTS;
// memory from MEMORY_RECORD or else NPU_OP_MEM; OP_MEMORY; kernels from
// TASK joined with COMPUTE_TASK_INFO; steps from ProfilerStep#N ops or else
// STEP_TIME; GC_RECORD. Times are epoch ns already. The file is opened
// read-only, so a database the profiler is still writing is never modified.
func ReadDB(path string) (*Data, error) {
	wal, err := checkSQLiteHeader(path)
	if err != nil {
		return nil, err
	}
	r, err := openDB(path, wal)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// torch_npu writes analyse.done beside its database once analysis ends.
	d := &Data{Path: path, Source: SourceDB, Complete: fileExists(filepath.Join(filepath.Dir(path), AnalyseDone))}
	if err := r.read(d); err != nil {
		return nil, err
	}
	return d, nil
}

// checkSQLiteHeader checks the magic and reports whether the database is
// in WAL mode (file format read/write versions 2, header bytes 18–19).
func checkSQLiteHeader(path string) (wal bool, err error) {
	f, err := safefile.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var hdr [20]byte
	n, _ := io.ReadFull(f, hdr[:])
	if n == 0 {
		return false, fmt.Errorf("%s: not an SQLite database: empty file", path)
	}
	if n < len(sqliteMagic) || string(hdr[:len(sqliteMagic)]) != sqliteMagic {
		return false, fmt.Errorf("%s: not an SQLite database (header %q)", path, hdr[:min(n, len(sqliteMagic))])
	}
	if n < len(hdr) {
		return false, fmt.Errorf("%s: truncated SQLite header (%d bytes)", path, n)
	}
	return hdr[18] == 2 || hdr[19] == 2, nil
}

// dbReader reads one database inside one read transaction (a consistent
// snapshot even while a writer appends).
type dbReader struct {
	path     string
	db       *sql.DB
	conn     *sql.Conn
	ctx      context.Context
	tables   map[string]string // lower-case name → name as created
	strs     map[int64]string
	missing  int // string ids not in STRING_IDS
	warnings []string
}

// sqliteURI makes a file: URI for path; ?, # and % in names are escaped.
func sqliteURI(path string, immutable bool) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	abs = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	u := "file:" + abs + "?mode=ro&_busy_timeout=5000&_query_only=1"
	if immutable {
		u += "&immutable=1"
	}
	return u
}

// openDB opens path read-only (mode=ro: SQLite never writes the file).
// A WAL-mode database without a -wal file beside it has no connection open
// (the last one to close removes the -wal file), so it is opened immutable:
// read without locks and without creating -wal/-shm files in the profiler's
// directory, which a read-only WAL reader otherwise does. With a -wal file
// a writer may be active, and the reader takes part in WAL locking to see
// a consistent snapshot. Should a read-only open fail for want of the -shm
// file (a directory we may not write), it is retried immutable too.
func openDB(path string, wal bool) (*dbReader, error) {
	immutable := wal && !fileExists(path+"-wal")
	r, err := openDBURI(path, sqliteURI(path, immutable))
	if err != nil && !immutable && shouldRetryImmutable(err) {
		r, err = openDBURI(path, sqliteURI(path, true))
	}
	return r, err
}

func shouldRetryImmutable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY:
		return true
	}
	return false
}

func openDBURI(path, uri string) (*dbReader, error) {
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r := &dbReader{path: path, db: db, ctx: context.Background()}
	if r.conn, err = db.Conn(r.ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err = r.conn.ExecContext(r.ctx, "BEGIN"); err == nil {
		err = r.loadTables()
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func (r *dbReader) close() {
	if r.conn != nil {
		_, _ = r.conn.ExecContext(r.ctx, "ROLLBACK")
		r.conn.Close()
	}
	r.db.Close()
}

func (r *dbReader) loadTables() error {
	// Tables only: a view runs arbitrary SQL (a hostile file could make it endless).
	rows, err := r.conn.QueryContext(r.ctx, "SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		return err
	}
	defer rows.Close()
	r.tables = map[string]string{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		r.tables[strings.ToLower(name)] = name
	}
	return rows.Err()
}

func (r *dbReader) has(table string) bool { _, ok := r.tables[strings.ToLower(table)]; return ok }

// dbRow is the current row of a table scan. Its getters convert what SQLite
// holds (an integer may arrive as text or a whole real: torch_npu declares
// PYTORCH_API's times TEXT) and remember the first value that cannot be
// converted; NULL and absent columns read as absent, never as an error.
type dbRow struct {
	r    *dbReader
	pos  map[string]int // wanted column → index in vals, absent if the table lacks it
	vals []any
	row  int   // 1-based, in scan order
	err  error // a required value that cannot be read: the scan fails
	bad  int   // optional values of a wrong type, read as absent
	bad1 string
}

// int returns column c as an integer; ok is false for NULL, no column or a
// value of a wrong type (counted, reported once per table as a warning).
func (w *dbRow) int(c string) (v int64, ok bool) {
	v, ok, err := w.conv(c)
	if err != nil {
		if w.bad++; w.bad == 1 {
			w.bad1 = fmt.Sprintf("row %d column %s: %v", w.row, c, err)
		}
	}
	return v, ok
}

// need returns column c as an integer where a row is useless without it:
// a value of a wrong type fails the scan; NULL gives ok = false.
func (w *dbRow) need(c string) (v int64, ok bool) {
	v, ok, err := w.conv(c)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("column %s: %w", c, err)
	}
	return v, ok
}

func (w *dbRow) conv(c string) (int64, bool, error) {
	i, has := w.pos[c]
	if !has {
		return 0, false, nil
	}
	return dbInt(w.vals[i])
}

// intOr returns column c, or def when it is NULL or absent.
func (w *dbRow) intOr(c string, def int64) int64 {
	if v, ok := w.int(c); ok {
		return v
	}
	return def
}

// str returns column c resolved through STRING_IDS; a TEXT value that is
// not a number is taken as the string itself.
func (w *dbRow) str(c string) string {
	i, has := w.pos[c]
	if !has {
		return ""
	}
	switch x := w.vals[i].(type) {
	case nil:
		return ""
	case string:
		if id, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return w.r.lookup(id)
		}
		return x
	case []byte:
		if id, err := strconv.ParseInt(strings.TrimSpace(string(x)), 10, 64); err == nil {
			return w.r.lookup(id)
		}
		return string(x)
	}
	id, ok := w.int(c)
	if !ok {
		return ""
	}
	return w.r.lookup(id)
}

func (r *dbReader) lookup(id int64) string {
	if s, ok := r.strs[id]; ok {
		return s
	}
	if id != dbInvalidID {
		r.missing++
	}
	return ""
}

// dbInt converts one SQLite value to an integer.
func dbInt(v any) (int64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= 1<<63 {
			return 0, false, fmt.Errorf("not an integer: %v", x)
		}
		return int64(x), true, nil
	case bool:
		if x {
			return 1, true, nil
		}
		return 0, true, nil
	case string:
		return textInt(x)
	case []byte:
		return textInt(string(x))
	}
	return 0, false, fmt.Errorf("not an integer: %T", v)
}

func textInt(s string) (int64, bool, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "N/A" || strings.EqualFold(s, "null") {
		return 0, false, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return int64(u), true, nil // a pointer above 2^63
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return int64(f), true, nil
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return 0, false, fmt.Errorf("not an integer: %q", s)
}

// each scans table, calling fn per row. The table must have the required
// columns; optional ones may be missing (they read as NULL). Errors name
// the file, table and 1-based row in scan order.
func (r *dbReader) each(table string, required, optional []string, fn func(w *dbRow) error) error {
	name, ok := r.tables[strings.ToLower(table)]
	if !ok {
		return fmt.Errorf("%s: no table %s", r.path, table)
	}
	qname := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	cols, err := r.columns(qname)
	if err != nil {
		return fmt.Errorf("%s: table %s: %w", r.path, table, err)
	}
	w := &dbRow{r: r, pos: map[string]int{}}
	var sel []string
	for i, c := range append(append([]string(nil), required...), optional...) {
		actual, ok := cols[strings.ToLower(c)]
		if !ok {
			if i < len(required) {
				return fmt.Errorf("%s: table %s has no column %s", r.path, table, c)
			}
			continue
		}
		w.pos[c] = len(sel)
		sel = append(sel, `"`+strings.ReplaceAll(actual, `"`, `""`)+`"`)
	}
	if len(sel) == 0 {
		sel = []string{"NULL"}
	}
	rows, err := r.conn.QueryContext(r.ctx, "SELECT "+strings.Join(sel, ",")+" FROM "+qname)
	if err != nil {
		return fmt.Errorf("%s: table %s: %w", r.path, table, err)
	}
	defer rows.Close()
	w.vals = make([]any, len(sel))
	ptrs := make([]any, len(sel))
	for i := range ptrs {
		ptrs[i] = &w.vals[i]
	}
	n := 0
	for rows.Next() {
		n++
		w.row = n
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("%s: table %s row %d: %w", r.path, table, n, err)
		}
		if err := fn(w); err != nil {
			return fmt.Errorf("%s: table %s row %d: %w", r.path, table, n, err)
		}
		if w.err != nil {
			return fmt.Errorf("%s: table %s row %d: %w", r.path, table, n, w.err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: table %s after row %d: %w", r.path, table, n, err)
	}
	if w.bad > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%s: table %s: %d values of a wrong type read as absent (first: %s)", r.path, table, w.bad, w.bad1))
	}
	return nil
}

// columns maps the lower-case column names of a table to their spelling.
func (r *dbReader) columns(qname string) (map[string]string, error) {
	rows, err := r.conn.QueryContext(r.ctx, "SELECT * FROM "+qname+" LIMIT 0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(names))
	for _, c := range names {
		m[strings.ToLower(c)] = c
	}
	return m, rows.Err()
}

// pidMaxLimit is Linux's PID_MAX_LIMIT on 64-bit: no pid or tid exceeds it.
const pidMaxLimit = 1 << 22

// linuxID reports whether v can be a Linux pid or tid.
func linuxID(v uint64) bool { return v >= 1 && v <= pidMaxLimit }

// splitGlobalTid undoes contact_2num, globalTid = pid<<32 | tid, and the
// decimal concatenation of the pid and tid digits that some msprof exports
// write instead (CANN_API 11814731181473 is pid 1181473, tid 1181473).
//
// The bit form is taken when both halves are ids (1..PID_MAX_LIMIT).
// Otherwise every split of the decimal digits whose parts are ids, without
// a leading zero, is a candidate: pid == tid (a main thread) wins, then the
// most even digit counts, then the shorter pid (tids are handed out after
// their pid). With no candidate, or g <= 0, the bit form stands: the value
// is only a row's label, so a corrupt one never fails the read. A decimal
// value that is also a valid bit form (about 1 in 1000) reads as bits.
func splitGlobalTid(g int64) (pid, tid uint64) {
	u := uint64(g)
	pid, tid = u>>32, u&0xffffffff
	if g <= 0 || linuxID(pid) && linuxID(tid) {
		return pid, tid
	}
	n := 0 // decimal digits of u
	for v := u; v > 0; v /= 10 {
		n++
	}
	if n > 14 { // two ids have at most 7 digits each
		return pid, tid
	}
	best := n // |pid digits - tid digits| of the best split so far
	pow, low := uint64(1), uint64(1)
	for k := 1; k < n; k++ { // k tid digits
		low, pow = pow, pow*10
		hi, lo := u/pow, u%pow
		if lo < low || !linuxID(hi) || !linuxID(lo) {
			continue // leading zero in the tid part, or not ids
		}
		if hi == lo {
			return hi, lo
		}
		// k rises, so the pid shortens: >= keeps the shorter pid on a tie.
		if d := max(n-2*k, 2*k-n); d <= best {
			best, pid, tid = d, hi, lo
		}
	}
	return pid, tid
}

// dbTables are the tables that make a database a profiler export.
var dbTables = []string{"PYTORCH_API", "CANN_API", "MSTX_EVENTS", "TASK", "MEMORY_RECORD", "NPU_OP_MEM", "OP_MEMORY"}

func (r *dbReader) read(d *Data) error {
	found := false
	for _, t := range dbTables {
		found = found || r.has(t)
	}
	if !found {
		return fmt.Errorf("%s: none of the tables %s: not a torch_npu or msprof profiler database", r.path, strings.Join(dbTables, ", "))
	}
	if !r.has("STRING_IDS") {
		return fmt.Errorf("%s: no table STRING_IDS (the name columns are ids into it)", r.path)
	}
	steps := []func(*Data) error{r.readStrings, r.readOps, r.readMemory, r.readOpMemory, r.readKernels, r.readGC}
	for _, f := range steps {
		if err := f(d); err != nil {
			return err
		}
	}
	d.finishOps()
	if len(d.Steps) == 0 && r.has("STEP_TIME") {
		if err := r.readStepTime(d); err != nil {
			return err
		}
	}
	d.sortMemory()
	d.Warnings = append(d.Warnings, r.warnings...)
	if r.missing > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s: %d string ids not in STRING_IDS read as empty names", r.path, r.missing))
	}
	return nil
}

func (r *dbReader) readStrings(*Data) error {
	r.strs = map[int64]string{}
	return r.each("STRING_IDS", []string{"id", "value"}, nil, func(w *dbRow) error {
		id, ok := w.int("id")
		if !ok {
			return nil
		}
		switch v := w.vals[w.pos["value"]].(type) {
		case string:
			r.strs[id] = v
		case []byte:
			r.strs[id] = string(v)
		case nil:
			r.strs[id] = ""
		default:
			r.strs[id] = fmt.Sprint(v)
		}
		return nil
	})
}

// timed reads the startNs/endNs pair of a row; rows without both are skipped
// and counted.
func timed(w *dbRow, start, end string, skipped *int) (s, e int64, ok bool) {
	s, ok1 := w.need(start)
	e, ok2 := w.need(end)
	if !ok1 || !ok2 {
		*skipped++
		return 0, 0, false
	}
	return s, e, true
}

func (r *dbReader) skippedWarning(d *Data, table string, n int, what string) {
	if n > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s: table %s: %d rows without %s skipped", r.path, table, n, what))
	}
}

func (r *dbReader) readOps(d *Data) error {
	if r.has("PYTORCH_API") {
		return r.readPytorchAPI(d)
	}
	// A CANN-only export: host API calls and mstx ranges are its op ranges.
	for _, t := range [...]struct{ table, name string }{{"CANN_API", "name"}, {"MSTX_EVENTS", "message"}} {
		if !r.has(t.table) {
			continue
		}
		skipped := 0
		err := r.each(t.table, []string{"startNs", "endNs"}, []string{t.name, "globalTid"}, func(w *dbRow) error {
			s, e, ok := timed(w, "startNs", "endNs", &skipped)
			if !ok {
				return nil
			}
			pid, tid := splitGlobalTid(w.intOr("globalTid", 0))
			d.Ops = append(d.Ops, Op{Name: w.str(t.name), StartNS: s, EndNS: e, DurNS: e - s, PID: pid, TID: tid, Seq: -1})
			return nil
		})
		if err != nil {
			return err
		}
		r.skippedWarning(d, t.table, skipped, "startNs/endNs")
	}
	return nil
}

func (r *dbReader) readPytorchAPI(d *Data) error {
	stacks, err := r.readCallchains()
	if err != nil {
		return err
	}
	conns, err := r.readConnectionIDs()
	if err != nil {
		return err
	}
	skipped := 0
	err = r.each("PYTORCH_API", []string{"startNs", "endNs", "name"},
		[]string{"globalTid", "connectionId", "sequenceNumber", "fwdThreadId", "inputDtypes", "inputShapes", "callchainId", "type"},
		func(w *dbRow) error {
			s, e, ok := timed(w, "startNs", "endNs", &skipped)
			if !ok {
				return nil
			}
			pid, tid := splitGlobalTid(w.intOr("globalTid", 0))
			switch w.intOr("type", apiTorchOp) {
			case apiPythonTrace:
				return nil // python_function slices, not ops (as in trace_view.json)
			case apiTaskQueue:
				name, deq := w.str("name"), false
				if pre, rest, ok := strings.Cut(name, "@"); ok {
					name, deq = rest, strings.EqualFold(pre, "Dequeue")
				} else {
					deq = strings.EqualFold(name, "Dequeue")
				}
				q := QueueRange{Name: name, Dequeue: deq, StartNS: s, EndNS: e, PID: pid, TID: tid}
				if c, ok := w.int("connectionId"); ok {
					q.CorrelationID = uint64(conns[c])
				}
				d.Queue = append(d.Queue, q)
				return nil
			}
			o := Op{
				Name: w.str("name"), StartNS: s, EndNS: e, DurNS: e - s, PID: pid, TID: tid,
				FwdTID: uint64(w.intOr("fwdThreadId", 0)), Seq: w.intOr("sequenceNumber", -1),
				InputDtypes: w.str("inputDtypes"), InputShapes: w.str("inputShapes"),
			}
			// torch_npu (FwkFileParser.get_fwk_api) puts "Input Dims" in the
			// inputDtypes column and "Input type" in inputShapes; shapes are
			// the ones in brackets, so swap them back when they are crossed.
			if strings.HasPrefix(o.InputDtypes, "[") && !strings.HasPrefix(o.InputShapes, "[") {
				o.InputDtypes, o.InputShapes = o.InputShapes, o.InputDtypes
			}
			if c, ok := w.int("callchainId"); ok {
				o.Stack = stacks[c]
			}
			d.Ops = append(d.Ops, o)
			return nil
		})
	if err != nil {
		return err
	}
	r.skippedWarning(d, "PYTORCH_API", skipped, "startNs/endNs")
	return nil
}

// readCallchains rebuilds call stacks: PYTORCH_CALLCHAINS holds one frame
// (a string id) per row; torch_npu split the stack at ";\r\n".
func (r *dbReader) readCallchains() (map[int64]string, error) {
	out := map[int64]string{}
	if !r.has("PYTORCH_CALLCHAINS") {
		return out, nil
	}
	type frame struct {
		depth int64
		s     string
	}
	frames := map[int64][]frame{}
	err := r.each("PYTORCH_CALLCHAINS", []string{"id", "stack"}, []string{"stackDepth"}, func(w *dbRow) error {
		id, ok := w.int("id")
		if ok {
			frames[id] = append(frames[id], frame{w.intOr("stackDepth", int64(len(frames[id]))), w.str("stack")})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, fs := range frames {
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].depth < fs[j].depth })
		parts := make([]string, len(fs))
		for i := range fs {
			parts[i] = fs[i].s
		}
		out[id] = strings.Join(parts, ";\r\n")
	}
	return out, nil
}

// readConnectionIDs maps a PYTORCH_API connectionId to its first connection
// (the task-queue correlation id shifted past CANN's ids).
func (r *dbReader) readConnectionIDs() (map[int64]int64, error) {
	out := map[int64]int64{}
	if !r.has("CONNECTION_IDS") {
		return out, nil
	}
	err := r.each("CONNECTION_IDS", []string{"id", "connectionId"}, nil, func(w *dbRow) error {
		id, ok1 := w.int("id")
		c, ok2 := w.int("connectionId")
		if _, seen := out[id]; ok1 && ok2 && !seen {
			out[id] = c
		}
		return nil
	})
	return out, err
}

func (r *dbReader) readMemory(d *Data) error {
	if r.has("MEMORY_RECORD") {
		skipped := 0
		err := r.each("MEMORY_RECORD", []string{"timestamp", "totalAllocated", "totalReserved"},
			[]string{"component", "totalActive", "streamPtr", "deviceId"}, func(w *dbRow) error {
				t, ok := w.need("timestamp")
				if !ok {
					skipped++
					return nil
				}
				m := MemoryRecord{
					TimeNS: t, Component: w.str("component"), Device: int(w.intOr("deviceId", -1)),
					Kind: MemoryInvalid, Allocated: w.intOr("totalAllocated", 0), Reserved: w.intOr("totalReserved", 0),
					HasAllocated: true, Stream: w.intOr("streamPtr", 0),
				}
				m.Active, m.HasActive = w.int("totalActive")
				d.Memory = append(d.Memory, m)
				return nil
			})
		if err != nil {
			return err
		}
		r.skippedWarning(d, "MEMORY_RECORD", skipped, "timestamp")
		return nil
	}
	if !r.has("NPU_OP_MEM") {
		return nil
	}
	// CANN's allocator events: type is an ENUM_MEMORY id (older exports: a
	// STRING_IDS id) naming allocate or release.
	kinds, err := r.memoryKinds()
	if err != nil {
		return err
	}
	skipped := 0
	err = r.each("NPU_OP_MEM", []string{"timestampNs"},
		[]string{"addr", "type", "size", "globalTid", "totalAllocate", "totalReserve", "component", "deviceId"}, func(w *dbRow) error {
			t, ok := w.need("timestampNs")
			if !ok {
				skipped++
				return nil
			}
			pid, tid := splitGlobalTid(w.intOr("globalTid", 0))
			m := MemoryRecord{
				TimeNS: t, Component: w.str("component"), Device: int(w.intOr("deviceId", -1)),
				Ptr: uint64(w.intOr("addr", 0)), Kind: MemoryInvalid, Stream: 0, PID: pid, TID: tid,
			}
			m.Allocated, m.HasAllocated = w.int("totalAllocate")
			m.Reserved = w.intOr("totalReserve", 0)
			size := w.intOr("size", 0)
			switch kinds[w.intOr("type", -1)] {
			case "allocate":
				m.Kind, m.AllocSize = MemoryMalloc, size
			case "release":
				m.Kind, m.AllocSize = MemoryFree, -size
			}
			d.Memory = append(d.Memory, m)
			return nil
		})
	if err != nil {
		return err
	}
	r.skippedWarning(d, "NPU_OP_MEM", skipped, "timestampNs")
	return nil
}

// memoryKinds names NPU_OP_MEM.type values in lower case.
func (r *dbReader) memoryKinds() (map[int64]string, error) {
	out := map[int64]string{}
	if !r.has("ENUM_MEMORY") {
		for id, s := range r.strs {
			if s == "allocate" || s == "release" {
				out[id] = s
			}
		}
		return out, nil
	}
	err := r.each("ENUM_MEMORY", []string{"id", "name"}, nil, func(w *dbRow) error {
		if id, ok := w.int("id"); ok {
			if s, isText := w.vals[w.pos["name"]].(string); isText {
				out[id] = strings.ToLower(s)
			}
		}
		return nil
	})
	return out, err
}

func (r *dbReader) readOpMemory(d *Data) error {
	if !r.has("OP_MEMORY") {
		return nil
	}
	return r.each("OP_MEMORY", []string{"size"},
		[]string{"name", "allocationTime", "releaseTime", "activeReleaseTime",
			"allocationTotalAllocated", "allocationTotalReserved", "allocationTotalActive",
			"releaseTotalAllocated", "releaseTotalReserved", "releaseTotalActive", "streamPtr", "deviceId"},
		func(w *dbRow) error {
			d.OpMemory = append(d.OpMemory, OpMemory{
				Name: w.str("name"), Size: w.intOr("size", 0),
				AllocNS: w.intOr("allocationTime", 0), ReleaseNS: w.intOr("releaseTime", 0),
				ActiveReleaseNS: w.intOr("activeReleaseTime", 0),
				AllocAllocated:  w.intOr("allocationTotalAllocated", -1), AllocReserved: w.intOr("allocationTotalReserved", -1),
				AllocActive:  w.intOr("allocationTotalActive", -1),
				RelAllocated: w.intOr("releaseTotalAllocated", -1), RelReserved: w.intOr("releaseTotalReserved", -1),
				RelActive: w.intOr("releaseTotalActive", -1),
				Stream:    w.intOr("streamPtr", 0), Device: int(w.intOr("deviceId", -1)),
			})
			return nil
		})
}

// readKernels joins TASK with COMPUTE_TASK_INFO on globalTaskId, as
// kernel_details.csv does: tasks without compute info (communication,
// memcpy) are not kernels.
func (r *dbReader) readKernels(d *Data) error {
	if !r.has("TASK") || !r.has("COMPUTE_TASK_INFO") {
		return nil
	}
	type info struct{ name, typ, core string }
	infos := map[int64]info{}
	err := r.each("COMPUTE_TASK_INFO", []string{"globalTaskId"}, []string{"name", "opType", "taskType"}, func(w *dbRow) error {
		if id, ok := w.int("globalTaskId"); ok {
			infos[id] = info{w.str("name"), w.str("opType"), w.str("taskType")}
		}
		return nil
	})
	if err != nil {
		return err
	}
	skipped := 0
	err = r.each("TASK", []string{"startNs", "endNs", "globalTaskId"}, []string{"deviceId"}, func(w *dbRow) error {
		id, ok := w.int("globalTaskId")
		in, known := infos[id]
		if !ok || !known {
			return nil
		}
		s, e, ok := timed(w, "startNs", "endNs", &skipped)
		if !ok {
			return nil
		}
		d.Kernels = append(d.Kernels, Kernel{Name: in.name, Type: in.typ, Core: in.core, StartNS: s, DurNS: e - s,
			Step: -1, Device: int(w.intOr("deviceId", -1))})
		return nil
	})
	if err != nil {
		return err
	}
	sort.SliceStable(d.Kernels, func(i, j int) bool { return d.Kernels[i].StartNS < d.Kernels[j].StartNS })
	r.skippedWarning(d, "TASK", skipped, "startNs/endNs")
	return nil
}

func (r *dbReader) readGC(d *Data) error {
	if !r.has("GC_RECORD") {
		return nil
	}
	skipped := 0
	err := r.each("GC_RECORD", []string{"startNs", "endNs"}, []string{"globalTid"}, func(w *dbRow) error {
		s, e, ok := timed(w, "startNs", "endNs", &skipped)
		if ok {
			pid, _ := splitGlobalTid(w.intOr("globalTid", 0))
			d.GC = append(d.GC, GCEvent{PID: pid, StartNS: s, EndNS: e})
		}
		return nil
	})
	r.skippedWarning(d, "GC_RECORD", skipped, "startNs/endNs")
	return err
}

// readStepTime takes steps from STEP_TIME when no ProfilerStep#N op gave
// them, and assigns ops to steps (assignSteps).
func (r *dbReader) readStepTime(d *Data) error {
	skipped := 0
	err := r.each("STEP_TIME", []string{"id", "startNs", "endNs"}, nil, func(w *dbRow) error {
		s, e, ok := timed(w, "startNs", "endNs", &skipped)
		if id, has := w.int("id"); ok && has {
			d.Steps = append(d.Steps, Step{ID: id, StartNS: s, EndNS: e})
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.skippedWarning(d, "STEP_TIME", skipped, "startNs/endNs")
	d.assignSteps()
	return nil
}

// readDBIn reads the SQLite export db of the profiler directory root.
func readDBIn(root, db string) (*Data, error) {
	d, err := ReadDB(db)
	if err != nil {
		return nil, err
	}
	d.Path = root
	return d, nil
}
