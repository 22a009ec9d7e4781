package profiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// endless yields its head, then the byte fill without end, counting what
// was read from it.
type endless struct {
	head []byte
	fill byte
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.head)
	e.head = e.head[n:]
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	e.read += int64(len(p))
	return len(p), nil
}

// A field without end (a plain or a quoted one, newlines included) is
// refused by row once it passes MaxCSVRecord, having read little more.
func TestCSVRecordBound(t *testing.T) {
	hdr := "Component,Timestamp(us),Total Reserved(MB),Device Type\n"
	for _, c := range []struct {
		name string
		head string
		fill byte
	}{
		{"plain field", hdr + "PTA,1,2,NPU:0\nPTA", 'x'},
		{"quoted field with newlines", hdr + "\"PTA", '\n'},
		{"header", "Component", 'x'},
	} {
		src := &endless{head: []byte(c.head), fill: c.fill}
		_, err := DecodeMemoryRecordCSV(src, "memory_record.csv")
		if err == nil || !strings.Contains(err.Error(), "a record over 1048576 bytes") {
			t.Errorf("%s: %v", c.name, err)
		}
		if src.read > 2*MaxCSVRecord {
			t.Errorf("%s: read %d bytes for one record", c.name, src.read)
		}
	}
	// A record just under the bound still reads.
	big := strings.Repeat("y", MaxCSVRecord-100)
	rs, err := DecodeMemoryRecordCSV(strings.NewReader(hdr+big+",1,2,NPU:0\nPTA,2,3,NPU:0\n"), "m.csv")
	if err != nil || len(rs) != 2 || rs[0].Component != big {
		t.Fatalf("record under the bound: %d rows, %v", len(rs), err)
	}
}

// A FRAMEWORK file over MaxFrameworkFile (here a sparse one) is refused by
// size before any of it is read, by the reader and the tailer alike.
func TestFrameworkFileBound(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "torch.op_range")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFrameworkFile + 1); err != nil {
		t.Skip("no sparse files here:", err)
	}
	f.Close()
	start := time.Now()
	var recs Records
	_, err = ReadFrameworkFile(p, &recs)
	want := "torch.op_range: 2147483649 bytes, over the 2147483648-byte limit for a FRAMEWORK file"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("ReadFrameworkFile: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v: the file was read", d)
	}
}
