// Package npusmi reads the text that Huawei's `npu-smi` tool prints: the
// device table of `npu-smi info` (with its process table) and the key/value
// list of `npu-smi info -t usages -i N`. It is a pure parser: running the
// tool is the poller's business (monitor/devpoll), so views that only show
// the figures never start processes themselves.
//
// The parser knows the layouts documented in docs/devices.md and refuses
// anything else with an error naming the line, rather than guess a number.
package npusmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MiB is what npu-smi calls a MB: every "(MB)" column counts 2^20 bytes.
const MiB = 1 << 20

// Info is one `npu-smi info` output.
type Info struct {
	Version string    // the tool's version from the title line ("24.1.rc1.b030"), "" when absent
	Chips   []Chip    // in print order
	Procs   []Process // the process table, in print order
}

// Chip is one chip row pair of the device table. An NPU (a card, an A3
// module) holds one or more chips; each prints two rows.
type Chip struct {
	NPU    int    // NPU id (the -i of other npu-smi commands)
	Chip   int    // chip index within the NPU
	PhyID  int    // physical chip id (A3 "Phy-ID" column), -1 when not printed
	Device int    // logical device id (310B/310P "Device" column), -1 when not printed
	Name   string // e.g. "910B3", "Ascend910", "310P3"
	Health string // "OK", "Warning", "Alarm", "Critical", "NA", …
	BusID  string // PCIe bus id, "" when npu-smi prints NA

	Power    float64 // W
	PowerOK  bool    // false: npu-smi printed NA or - (second chips of A3 and 310P)
	TempC    int
	TempOK   bool
	AICore   int // AI Core usage, percent
	AICoreOK bool

	HugepagesUsed, HugepagesTotal int64 // pages
	HugepagesOK                   bool

	// MemUsedMB / MemTotalMB is the "Memory-Usage(MB)" column: the chip's
	// DDR. 310B/310P have no HBM, so this is all the device memory they have.
	MemUsedMB, MemTotalMB int64
	MemOK                 bool
	// HBMUsedMB / HBMTotalMB is the "HBM-Usage(MB)" column (910 series, A3).
	HBMUsedMB, HBMTotalMB int64
	HBMOK                 bool
}

// Process is one row of the process table.
type Process struct {
	NPU   int
	Chip  int
	PID   int
	Name  string // as npu-smi prints it (cut to the column's width)
	MemMB int64  // "Process memory(MB)": HBM on HBM chips, DDR on 310B/310P
}

// DeviceMemory returns the chip's device memory in bytes: HBM where the
// chip has HBM, else the Memory-Usage column (310B/310P); hbm says which.
func (c Chip) DeviceMemory() (used, total int64, hbm, ok bool) {
	switch {
	case c.HBMOK:
		return c.HBMUsedMB * MiB, c.HBMTotalMB * MiB, true, true
	case c.MemOK:
		return c.MemUsedMB * MiB, c.MemTotalMB * MiB, false, true
	}
	return 0, 0, false, false
}

// ChipProcs returns the processes the table lists on chip c.
func (in *Info) ChipProcs(c Chip) []Process {
	var out []Process
	for _, p := range in.Procs {
		if p.NPU == c.NPU && p.Chip == c.Chip {
			out = append(out, p)
		}
	}
	return out
}

// Sample is one poll of npu-smi as a poller keeps it: the newest table that
// parsed and the outcome of the newest attempt.
type Sample struct {
	Seq    uint64    // number of polls so far (0: none finished yet)
	Info   *Info     // the newest table that parsed; nil before the first
	Usages []Usages  // the usages read with Info (pollers asked for them)
	At     time.Time // when Info was read
	Err    error     // the newest poll's error (nil: Info is from it)
	Source string    // what was polled, e.g. the npu-smi path, or "simulated"
	Every  time.Duration
}

// Error is a parse error; Line is 1-based.
type Error struct {
	Line int
	Text string // the offending line, spaces squeezed, cut to 120 bytes
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "npu-smi info: " + e.Msg
	}
	return fmt.Sprintf("npu-smi info: line %d: %s: %q", e.Line, e.Msg, e.Text)
}

// MaxLines bounds the input; a real table of 16 NPUs and hundreds of
// processes stays far below it.
const MaxLines = 20000

// MaxLineBytes bounds one line of npu-smi output; a real row is under
// 200 bytes.
const MaxLineBytes = 64 << 10

// lineErr names a scanner error; a line past MaxLineBytes is said so.
func lineErr(err error) string {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Sprintf("a line over %d bytes", MaxLineBytes)
	}
	return err.Error()
}

// The header cells the parser knows. Keys are the header text with its
// spaces squeezed.
var (
	head1 = [3]string{"NPU Name", "Health", "Power(W) Temp(C) Hugepages-Usage(page)"}
	// second header row: first cell variants and third cell variants
	head2Chip = map[string]string{"Chip": "", "Chip Device": "device", "Chip Phy-ID": "phy"}
	head2Bus  = "Bus-Id"
	head2Mem  = map[string][]string{
		"AICore(%) Memory-Usage(MB)":               {"mem"},
		"AICore(%) Memory-Usage(MB) HBM-Usage(MB)": {"mem", "hbm"},
		"AICore(%) HBM-Usage(MB)":                  {"hbm"},
	}
	procHead = [4]string{"NPU Chip", "Process id", "Process name", "Process memory(MB)"}
)

type parser struct {
	in     Info
	line   int
	text   string
	second string   // the second header row's chip-cell layout: "", "device", "phy"
	mem    []string // the memory pairs of the second row's third cell
}

func (p *parser) errf(format string, a ...any) error {
	t := squeeze(p.text) // table padding says nothing
	if len(t) > 120 {
		t = t[:120]
	}
	return &Error{Line: p.line, Text: t, Msg: fmt.Sprintf(format, a...)}
}

// cells splits a table row at its bars: "| a | b |" gives ["a", "b"].
func cells(s string) []string {
	s = strings.TrimRight(s, " \t\r")
	s = strings.TrimPrefix(s, "|")
	s = strings.TrimSuffix(s, "|")
	parts := strings.Split(s, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// tokens splits a cell into values, with "/" a token of its own: npu-smi
// drops the space before the slash once a value has five digits
// ("20701/ 65536").
func tokens(s string) []string {
	return strings.Fields(strings.ReplaceAll(s, "/", " / "))
}

// ParseInfo parses the output of `npu-smi info`.
func ParseInfo(b []byte) (*Info, error) {
	p := &parser{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	const (
		stTop     = iota // before the device header
		stHead2          // after the first header row
		stHeadEnd        // after the second header row, before the ==== rule
		stChips          // in the chip rows
		stProcHead
		stProcs
	)
	st := stTop
	var pending []string // the first row of a chip pair
	pendingLine, pendingText := 0, ""
	sawTable := false
	for sc.Scan() {
		p.line++
		p.text = sc.Text()
		if p.line > MaxLines {
			return nil, p.errf("more than %d lines", MaxLines)
		}
		t := strings.TrimSpace(p.text)
		if t == "" {
			continue
		}
		if t[0] == '+' {
			if strings.Trim(t, "+-= ") != "" {
				return nil, p.errf("unknown rule line")
			}
			switch st {
			case stHeadEnd:
				st = stChips
			case stChips:
				if pending != nil {
					return nil, p.errf("rule after the first row of a chip, before its second")
				}
			case stProcHead:
				// the rule above or below the process header
			}
			continue
		}
		if t[0] != '|' {
			if st == stTop && !sawTable {
				// text before the table (npu-smi's own error messages)
				return nil, p.errf("not an npu-smi info table")
			}
			return nil, p.errf("unknown line")
		}
		sawTable = true
		cs := cells(t)
		switch st {
		case stTop:
			if len(cs) == 1 && strings.HasPrefix(cs[0], "npu-smi") {
				if i := strings.Index(cs[0], "Version:"); i >= 0 {
					p.in.Version = strings.TrimSpace(cs[0][i+len("Version:"):])
				} else if f := strings.Fields(cs[0]); len(f) > 1 {
					p.in.Version = f[1]
				}
				continue
			}
			if len(cs) != 3 || squeeze(cs[0]) != head1[0] || squeeze(cs[1]) != head1[1] || squeeze(cs[2]) != head1[2] {
				return nil, p.errf("unknown header (want %q | %q | %q)", head1[0], head1[1], head1[2])
			}
			st = stHead2
		case stHead2:
			if len(cs) != 3 || squeeze(cs[1]) != head2Bus {
				return nil, p.errf("unknown second header row")
			}
			kind, ok := head2Chip[squeeze(cs[0])]
			mem, ok2 := head2Mem[squeeze(cs[2])]
			if !ok || !ok2 {
				return nil, p.errf("unknown second header row")
			}
			p.second, p.mem = kind, mem
			st = stHeadEnd
		case stHeadEnd:
			return nil, p.errf("a row where the header rule belongs")
		case stChips:
			if len(cs) == 4 && squeeze(cs[0]) == "NPU Chip" {
				if pending != nil {
					return nil, p.errf("process table after the first row of a chip")
				}
				if err := p.procHeader(cs); err != nil {
					return nil, err
				}
				st = stProcHead
				continue
			}
			if len(cs) != 3 {
				return nil, p.errf("chip row with %d cells, want 3", len(cs))
			}
			if pending == nil {
				pending, pendingLine, pendingText = cs, p.line, p.text
				continue
			}
			c, err := p.chip(pending, pendingLine, pendingText, cs)
			if err != nil {
				return nil, err
			}
			p.in.Chips = append(p.in.Chips, c)
			pending = nil
		case stProcHead, stProcs:
			st = stProcs
			if err := p.proc(cs); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		p.line++
		p.text = ""
		return nil, p.errf("%s", lineErr(err))
	}
	p.text = ""
	switch {
	case !sawTable:
		return nil, &Error{Msg: "no device table in the output"}
	case st < stChips:
		return nil, &Error{Msg: fmt.Sprintf("the output ends inside the table header (line %d)", p.line)}
	case pending != nil:
		p.line, p.text = pendingLine, pendingText
		return nil, p.errf("chip row without its second row")
	case len(p.in.Chips) == 0:
		return nil, &Error{Msg: "the device table lists no chips"}
	}
	return &p.in, nil
}

func (p *parser) procHeader(cs []string) error {
	for i, h := range procHead {
		if squeeze(cs[i]) != h {
			return p.errf("unknown process table header (want %q)", strings.Join(procHead[:], " | "))
		}
	}
	return nil
}

// proc parses one process table row.
func (p *parser) proc(cs []string) error {
	if len(cs) == 1 {
		if strings.HasPrefix(squeeze(cs[0]), "No running processes found") {
			return nil
		}
		return p.errf("unknown process table row")
	}
	if len(cs) != 4 {
		return p.errf("process row with %d cells, want 4", len(cs))
	}
	ids := strings.Fields(cs[0])
	if len(ids) != 2 {
		return p.errf("process row: want NPU and chip ids in the first cell")
	}
	var pr Process
	var err error
	if pr.NPU, err = p.int(ids[0], "NPU id"); err != nil {
		return err
	}
	if pr.Chip, err = p.int(ids[1], "chip id"); err != nil {
		return err
	}
	if pr.PID, err = p.int(cs[1], "process id"); err != nil {
		return err
	}
	if pr.PID <= 0 {
		return p.errf("process id %d", pr.PID)
	}
	pr.Name = cs[2]
	if pr.MemMB, err = p.int64(cs[3], "process memory"); err != nil {
		return err
	}
	p.in.Procs = append(p.in.Procs, pr)
	return nil
}

// chip parses a row pair: r1 is "NPU Name | Health | Power Temp Hugepages",
// r2 "Chip [Device|Phy-ID] | Bus-Id | AICore Memory [HBM]".
func (p *parser) chip(r1 []string, line1 int, text1 string, r2 []string) (Chip, error) {
	c := Chip{PhyID: -1, Device: -1}
	line2, text2 := p.line, p.text
	at1 := func() { p.line, p.text = line1, text1 }
	at2 := func() { p.line, p.text = line2, text2 }
	defer at2()

	// first row
	at1()
	f := strings.Fields(r1[0])
	if len(f) < 2 {
		return c, p.errf("want NPU id and name in the first cell")
	}
	var err error
	if c.NPU, err = p.int(f[0], "NPU id"); err != nil {
		return c, err
	}
	c.Name = strings.Join(f[1:], " ")
	c.Health = r1[1]
	if c.Health == "" {
		return c, p.errf("empty health")
	}
	tk := tokens(r1[2])
	if len(tk) != 5 || tk[3] != "/" {
		return c, p.errf("want Power Temp used / total in the third cell")
	}
	if c.Power, c.PowerOK, err = p.optFloat(tk[0], "power"); err != nil {
		return c, err
	}
	var t float64
	if t, c.TempOK, err = p.optFloat(tk[1], "temperature"); err != nil {
		return c, err
	}
	c.TempC = int(t)
	if c.TempOK && float64(c.TempC) != t {
		return c, p.errf("temperature %q: not a whole number", tk[1])
	}
	if c.HugepagesUsed, c.HugepagesTotal, c.HugepagesOK, err = p.pair(tk[2], tk[4], "hugepages"); err != nil {
		return c, err
	}

	// second row
	at2()
	f = strings.Fields(r2[0])
	want := 1
	if p.second != "" {
		want = 2
	}
	if len(f) != want {
		return c, p.errf("want %d id(s) in the first cell", want)
	}
	if c.Chip, err = p.int(f[0], "chip id"); err != nil {
		return c, err
	}
	switch p.second {
	case "device":
		if c.Device, err = p.int(f[1], "device id"); err != nil {
			return c, err
		}
	case "phy":
		if c.PhyID, err = p.int(f[1], "Phy-ID"); err != nil {
			return c, err
		}
	}
	if r2[1] != "NA" {
		c.BusID = r2[1]
	}
	tk = tokens(r2[2])
	if len(tk) != 1+3*len(p.mem) {
		return c, p.errf("want AICore and %d used / total pair(s) in the third cell", len(p.mem))
	}
	var a float64
	if a, c.AICoreOK, err = p.optFloat(tk[0], "AICore"); err != nil {
		return c, err
	}
	c.AICore = int(a)
	if c.AICoreOK && (float64(c.AICore) != a || a < 0 || a > 100) {
		return c, p.errf("AICore %q: want a whole percentage", tk[0])
	}
	for i, kind := range p.mem {
		u, sl, tot := tk[1+3*i], tk[2+3*i], tk[3+3*i]
		if sl != "/" {
			return c, p.errf("want used / total for %s", kind)
		}
		if kind == "mem" {
			c.MemUsedMB, c.MemTotalMB, c.MemOK, err = p.pair(u, tot, "Memory-Usage")
		} else {
			c.HBMUsedMB, c.HBMTotalMB, c.HBMOK, err = p.pair(u, tot, "HBM-Usage")
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

func absent(s string) bool { return s == "NA" || s == "-" || s == "N/A" }

func (p *parser) int(s, what string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, p.errf("%s %q: not a non-negative whole number", what, s)
	}
	return v, nil
}

func (p *parser) int64(s, what string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > 1<<40 {
		return 0, p.errf("%s %q: not a non-negative whole number", what, s)
	}
	return v, nil
}

func (p *parser) optFloat(s, what string) (float64, bool, error) {
	if absent(s) {
		return 0, false, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < -1000 || v > 1e6 || v != v {
		return 0, false, p.errf("%s %q: not a number", what, s)
	}
	return v, true, nil
}

// pair reads "used / total"; both absent gives ok false.
func (p *parser) pair(u, t, what string) (used, total int64, ok bool, err error) {
	if absent(u) && absent(t) {
		return 0, 0, false, nil
	}
	if used, err = p.int64(u, what+" used"); err != nil {
		return
	}
	if total, err = p.int64(t, what+" total"); err != nil {
		return
	}
	return used, total, true, nil
}
