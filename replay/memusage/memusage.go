// Package memusage reads the side file torch_npu's _dump_snapshot writes
// next to a memory snapshot: device_<N>_memUsageInfo_<YYYYmmddHHMMSS>.csv,
// the device memory each module of the software stack holds (HCCL, the
// runtime, …) as aclrtGetMemUsageInfo reports it, columns
// moduleName,curMemSize(MB),memPeakSize(MB). It also pairs such a file with
// the snapshot it belongs to (Beside). docs/files.md, "torch_npu's side
// files", says what the code relies on.
package memusage

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/internal/safefile"
)

// MiB is what the file calls a MB (as npu-smi does): 2^20 bytes.
const MiB = 1 << 20

// Limits on a file. A real one lists a few dozen modules in a few KiB.
const (
	MaxFileBytes = 1 << 20 // refused by its size before it is read
	MaxModules   = 4096
	MaxNameBytes = 256 // one module name
	// maxMB bounds one figure: 2^30 MB is 1 PiB, far past any device.
	maxMB = 1 << 30
)

// Header is the first line torch_npu writes.
var Header = []string{"moduleName", "curMemSize(MB)", "memPeakSize(MB)"}

// Module is one row: what a module holds on the device now (Cur) and at
// most so far (Peak), in bytes.
type Module struct {
	Name string `json:"module"`
	Cur  int64  `json:"cur_bytes"`
	Peak int64  `json:"peak_bytes"`
}

// File is one memUsageInfo CSV.
type File struct {
	Path   string `json:"path"`
	Device int    `json:"device"`
	// Stamp is the time in the name: the writer's local wall clock, with
	// no zone, held as those digits in UTC (compare Stamps with Stamps).
	Stamp   time.Time `json:"-"`
	Modules []Module  `json:"modules"`
}

// Total is the bytes the modules hold now (Σ Cur).
func (f *File) Total() int64 {
	var n int64
	for _, m := range f.Modules {
		n += m.Cur
	}
	return n
}

// ByCur returns the modules holding something, most first (ties: by name).
func (f *File) ByCur() []Module {
	var out []Module
	for _, m := range f.Modules {
		if m.Cur > 0 {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b Module) int {
		if a.Cur != b.Cur {
			if a.Cur > b.Cur {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Summary writes the modules holding something, most first, at most n of
// them ("HCCL 1.2 GiB, RUNTIME 300.0 MiB, 2 more"); size writes bytes.
func (f *File) Summary(n int, size func(int64) string) string {
	ms := f.ByCur()
	var parts []string
	for i, m := range ms {
		if n > 0 && i == n {
			parts = append(parts, fmt.Sprintf("%d more", len(ms)-n))
			break
		}
		parts = append(parts, m.Name+" "+size(m.Cur))
	}
	return strings.Join(parts, ", ")
}

// Error is a parse error: the file, the 1-based line (0: the file as a
// whole), the column's name where one value was bad, and why.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// stampLayout is the name's YYYYmmddHHMMSS.
const stampLayout = "20060102150405"

// ParseName reads device_<N>_memUsageInfo_<YYYYmmddHHMMSS>.csv; ok is false
// for any other name.
func ParseName(name string) (device int, stamp time.Time, ok bool) {
	name = filepath.Base(name)
	rest, found := strings.CutPrefix(name, "device_")
	if !found {
		return 0, time.Time{}, false
	}
	rest, found = strings.CutSuffix(rest, ".csv")
	if !found {
		return 0, time.Time{}, false
	}
	dev, ts, found := strings.Cut(rest, "_memUsageInfo_")
	if !found || !isDigits(dev) || len(dev) > 4 || len(ts) != len(stampLayout) || !isDigits(ts) {
		return 0, time.Time{}, false
	}
	t, err := time.Parse(stampLayout, ts)
	if err != nil {
		return 0, time.Time{}, false
	}
	d, _ := strconv.Atoi(dev)
	return d, t, true
}

// IsName reports whether name is a memUsageInfo CSV's.
func IsName(name string) bool {
	_, _, ok := ParseName(name)
	return ok
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Read reads and parses the file at path (at most MaxFileBytes; anything
// but a regular file is refused). The device and stamp come from the name;
// a file named otherwise keeps Device -1 and a zero Stamp.
func Read(path string) (*File, error) {
	b, err := safefile.ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse parses a file's bytes; path names it in errors and in the File.
func Parse(path string, b []byte) (*File, error) {
	f := &File{Path: path, Device: -1}
	if d, t, ok := ParseName(path); ok {
		f.Device, f.Stamp = d, t
	}
	if len(b) > MaxFileBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes, over the %d-byte limit for this file", len(b), MaxFileBytes)}
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a BOM, as spreadsheet tools write one
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1 // counted here, to name the line
	r.TrimLeadingSpace = true
	r.ReuseRecord = true
	header := true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &Error{File: path, Line: pe.Line, Msg: pe.Err.Error()}
			}
			return nil, &Error{File: path, Msg: err.Error()}
		}
		line, _ := r.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank line with spaces
		}
		if header {
			header = false
			if !isHeader(rec) {
				return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("the header is %q, want %q",
					cells.TruncRight(strings.Join(rec, ","), 121), strings.Join(Header, ","))}
			}
			continue
		}
		if len(rec) != len(Header) {
			return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("%d fields, want %d (%s)", len(rec), len(Header), strings.Join(Header, ","))}
		}
		if len(f.Modules) == MaxModules {
			return nil, &Error{File: path, Line: line, Msg: fmt.Sprintf("more than %d modules", MaxModules)}
		}
		name := strings.TrimSpace(rec[0])
		switch {
		case name == "":
			return nil, &Error{File: path, Line: line, Field: Header[0], Msg: "empty"}
		case len(name) > MaxNameBytes:
			return nil, &Error{File: path, Line: line, Field: Header[0], Msg: fmt.Sprintf("%d bytes, over %d", len(name), MaxNameBytes)}
		}
		m := Module{Name: strings.Clone(name)}
		for i, dst := range []*int64{&m.Cur, &m.Peak} {
			v, err := parseMB(rec[i+1])
			if err != nil {
				return nil, &Error{File: path, Line: line, Field: Header[i+1], Msg: err.Error()}
			}
			*dst = v
		}
		f.Modules = append(f.Modules, m)
	}
	if header {
		return nil, &Error{File: path, Msg: "empty: no header line"}
	}
	return f, nil
}

func isHeader(rec []string) bool {
	if len(rec) != len(Header) {
		return false
	}
	for i, h := range Header {
		if !strings.EqualFold(strings.TrimSpace(rec[i]), h) {
			return false
		}
	}
	return true
}

// parseMB reads a figure in MB (integer or decimal) as bytes.
func parseMB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; (c < '0' || c > '9') && c != '.' {
			return 0, fmt.Errorf("%q is not a non-negative number of MB", cells.TruncRight(t, 41))
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a non-negative number of MB", cells.TruncRight(t, 41))
	}
	if v > maxMB {
		return 0, fmt.Errorf("%s MB is over %d MB (1 PiB): impossible for a device", cells.TruncRight(t, 41), maxMB)
	}
	return int64(math.Round(v * MiB)), nil
}

// MaxSkew is how far apart in time a snapshot and a memUsageInfo CSV may
// be and still be paired.
const MaxSkew = 10 * time.Minute

// SnapshotStamp is a snapshot file's time for pairing: the
// YYYYmmddHHMMSS token in its name (oom_snapshot_<pid>_<stamp>.pickle),
// else its modification time as local wall-clock digits (the clock
// torch_npu names its files by). ok is false when neither is known.
func SnapshotStamp(path string) (time.Time, bool) {
	name := filepath.Base(path)
	name = strings.TrimSuffix(name, filepath.Ext(name))
	for _, tok := range strings.Split(name, "_") {
		if len(tok) == len(stampLayout) && isDigits(tok) {
			if t, err := time.Parse(stampLayout, tok); err == nil {
				return t, true
			}
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}, false
	}
	return wallDigits(st.ModTime()), true
}

// wallDigits is t's local wall clock held as UTC digits (a Stamp).
func wallDigits(t time.Time) time.Time {
	l := t.Local()
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// Beside returns the memUsageInfo CSV of device in the snapshot file's own
// directory whose name's stamp is nearest the snapshot's (SnapshotStamp),
// at most MaxSkew away; of two as near, the later (torch_npu writes the
// CSV after the pickle). ok is false when there is none.
func Beside(snapshot string, device int) (path string, ok bool) {
	at, known := SnapshotStamp(snapshot)
	if !known {
		return "", false
	}
	dir := filepath.Dir(snapshot)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	var best time.Time
	var bestD time.Duration
	for _, e := range ents {
		d, t, isCSV := ParseName(e.Name())
		if !isCSV || d != device || e.IsDir() {
			continue
		}
		dist := t.Sub(at)
		if dist < 0 {
			dist = -dist
		}
		if dist > MaxSkew {
			continue
		}
		if !ok || dist < bestD || dist == bestD && t.After(best) {
			path, best, bestD, ok = filepath.Join(dir, e.Name()), t, dist, true
		}
	}
	return path, ok
}

// ReadBeside reads the CSV Beside the snapshot for each device; a device
// without one is left out. A file that does not parse is an error (and is
// left out); the others are still returned.
func ReadBeside(snapshot string, devices []int) ([]*File, []error) {
	var out []*File
	var errs []error
	for _, d := range devices {
		p, ok := Beside(snapshot, d)
		if !ok {
			continue
		}
		f, err := Read(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f)
	}
	return out, errs
}
