package replay

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// exportBenchFile is the snapshot the export benchmarks write: the real
// torch_npu fixture, or $NPUMON_EXPORT_BENCH (e.g. a demo's 3.8 MB dump).
func exportBenchFile(b *testing.B) *Capture {
	path := os.Getenv("NPUMON_EXPORT_BENCH")
	if path == "" {
		path = fixture.Path(b, "snapshots/npu-2.6-msinsight-snapshot_1768383987920985470.pkl")
	}
	c, err := DecodeFile(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkWriteJSON: the compact form (the baseline, WriteJSON, is the
// torch shape --pretty writes) and the pickle, same run; bytes/op is the
// output's size.
func BenchmarkWriteJSON(b *testing.B) {
	c := exportBenchFile(b)
	for _, w := range []struct {
		name  string
		write func(io.Writer, *Capture) error
	}{
		{"pretty", func(o io.Writer, c *Capture) error { return WriteJSON(o, c.Snapshot, ExportDict) }},
		{"compact", func(o io.Writer, c *Capture) error { return WriteCompactJSON(o, c.Snapshot, ExportDict) }},
		{"pickle", func(o io.Writer, c *Capture) error { return WritePickle(o, c.Snapshot, ExportDict) }},
	} {
		b.Run(w.name, func(b *testing.B) {
			var out bytes.Buffer
			w.write(&out, c)
			b.ReportAllocs()
			for b.Loop() {
				if err := w.write(io.Discard, c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "out-bytes")
		})
	}
}

// BenchmarkDecodeJSON reads back each form of exportBenchFile's export.
func BenchmarkDecodeJSON(b *testing.B) {
	c := exportBenchFile(b)
	for _, w := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"pretty", func(o io.Writer) error { return WriteJSON(o, c.Snapshot, ExportDict) }},
		{"compact", func(o io.Writer) error { return WriteCompactJSON(o, c.Snapshot, ExportDict) }},
		{"pickle", func(o io.Writer) error { return WritePickle(o, c.Snapshot, ExportDict) }},
	} {
		b.Run(w.name, func(b *testing.B) {
			var in bytes.Buffer
			w.write(&in)
			b.SetBytes(int64(in.Len()))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(bytes.NewReader(in.Bytes()), int64(in.Len()), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
