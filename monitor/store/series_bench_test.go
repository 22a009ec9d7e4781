package store

import (
	"math/rand/v2"
	"testing"

	"github.com/npumon/npumon/internal/testutil/benchcpu"
)

// seriesBenchValues are n byte totals as a trace makes them: a block of
// 512-byte multiples up to 1 MiB allocated or freed per value, around a
// level of a few GiB.
func seriesBenchValues(n int) []int64 {
	r := rand.New(rand.NewPCG(11, 12))
	xs := make([]int64, n)
	v := int64(4 << 30)
	for i := range xs {
		d := (1 + r.Int64N(2048)) * 512
		if r.IntN(2) == 0 && v > d {
			d = -d
		}
		v += d
		xs[i] = v
	}
	return xs
}

// BenchmarkSeriesAppendBatch: a live series' appends, 1,024 values a
// batch (flushSeries), with the pyramid kept up; ns/op is per value.
func BenchmarkSeriesAppendBatch(b *testing.B) {
	xs := seriesBenchValues(1 << 20)
	var s series
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i += 1024 {
		j := i % len(xs)
		if j == 0 {
			s = series{}
		}
		s.appendBatch(xs[j : j+min(1024, b.N-i)])
	}
	benchcpu.Report(b, c0, float64(b.N), "values/cpu-s")
}

// BenchmarkSeriesAppend: value by value (a marker's append).
func BenchmarkSeriesAppend(b *testing.B) {
	xs := seriesBenchValues(1 << 20)
	var s series
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		j := i % len(xs)
		if j == 0 {
			s = series{}
		}
		s.append(xs[j])
	}
	benchcpu.Report(b, c0, float64(b.N), "values/cpu-s")
}

// BenchmarkSeriesExtremes: min and max over a random range of a series of
// 1 M values (a column of a chart), and at of a random value.
func BenchmarkSeriesExtremes(b *testing.B) {
	xs := seriesBenchValues(1 << 20)
	var s series
	s.appendBatch(xs)
	r := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	c0 := benchcpu.Now()
	var sink int64
	for i := 0; i < b.N; i++ {
		a := r.IntN(len(xs))
		m, _ := s.extremes(a, a+1+r.IntN(len(xs)-a))
		sink += m.Max - m.Min + s.at(r.IntN(len(xs)))
	}
	benchcpu.Report(b, c0, 0, "")
	if sink == 0 {
		b.Log(sink)
	}
}
