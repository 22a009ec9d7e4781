package profiler

import (
	"strconv"
	"testing"
)

func TestSplitGlobalTid(t *testing.T) {
	for _, c := range []struct {
		name     string
		g        int64
		pid, tid uint64
	}{
		{"zero", 0, 0, 0},
		// msinsight_msprof_0.db: NPU_OP_MEM and MSTX_EVENTS hold the bit form,
		{"bit main thread", 830719689683849, 193417, 193417},
		{"bit worker", 830719689687710, 193417, 197278},
		{"bit mstx", 4398785246503084, 1024172, 1024172},
		{"bit mstx worker", 4398785246508220, 1024172, 1029308},
		// CANN_API the decimal one: bits would give 2750 / 3571117473.
		{"decimal main thread", 11814731181473, 1181473, 1181473},
		{"decimal worker", 11814731181490, 1181473, 1181490},
		{"bit at PID_MAX_LIMIT", 1<<22<<32 | 1<<22, 1 << 22, 1 << 22},
		{"bit smallest", 1<<32 | 1, 1, 1},
		// A decimal value that is also a valid bit form reads as bits.
		{"both valid reads as bits", 10002981000298, 2329, 2167914},
		// pid 0 or tid 0 is no thread, so these are read as decimal.
		{"decimal small ids", 77, 7, 7},
		{"tid 0 is no bit form", 1 << 32, 42949, 67296},
		{"ambiguous, equal halves win", 123123, 123, 123},
		{"ambiguous, even digit counts win", 12345678, 1234, 5678},
		{"ambiguous, shorter pid on a tie", 1234567, 123, 4567},
		{"tid part with a leading zero is no candidate", 1005, 100, 5},
		{"none valid: zeros", 1000000000, 0, 1000000000},
		{"none valid: 7+7 digits over the limit", 99999999999999, 23283, 276447231},
		{"none valid: one digit", 5, 0, 5},
		{"none valid: over 14 digits", 1 << 62, 1 << 30, 0},
		{"negative", -1, 0xffffffff, 0xffffffff},
		{"negative is never decimal", -11814731181473, 4294964545, 723849823},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, tid := splitGlobalTid(c.g)
			if pid != c.pid || tid != c.tid {
				t.Errorf("%s: splitGlobalTid(%d) = %d, %d; want %d, %d", c.name, c.g, pid, tid, c.pid, c.tid)
			}
		})
	}
}

// TestReadDBGlobalTidForms reads the real msprof export, whose CANN_API rows
// concatenate pid and tid digits while MSTX_EVENTS and NPU_OP_MEM shift.
func TestReadDBGlobalTidForms(t *testing.T) {
	d, err := ReadDir(fixtureDB(t))
	if err != nil {
		t.Fatal(err)
	}
	type thread struct{ pid, tid uint64 }
	cann := map[string]bool{"aclrtGetDeviceCount": true, "aclrtSynchronizeStream": true, "aclrtMemcpy": true}
	ops := map[thread]int{}
	for _, o := range d.Ops {
		th := thread{o.PID, o.TID}
		if cann[o.Name] && th != (thread{1181473, 1181473}) {
			t.Errorf("CANN_API op %s at %d: pid/tid %d/%d, want 1181473/1181473", o.Name, o.StartNS, o.PID, o.TID)
		}
		ops[th]++
	}
	// 4 CANN_API calls; 13 MSTX_EVENTS ranges on two threads of pid 1024172.
	want := map[thread]int{{1181473, 1181473}: 4, {1024172, 1024172}: 4, {1024172, 1029308}: 9}
	if len(ops) != len(want) {
		t.Errorf("op threads %v, want %v", ops, want)
	}
	for th, n := range want {
		if ops[th] != n {
			t.Errorf("op threads %v, want %v", ops, want)
			break
		}
	}
	mem := map[thread]int{}
	for _, m := range d.Memory {
		mem[thread{m.PID, m.TID}]++
	}
	if len(mem) != 2 || mem[thread{193417, 193417}] != 252 || mem[thread{193417, 197278}] != 242 {
		t.Errorf("NPU_OP_MEM threads %v, want 252 on 193417/193417 and 242 on 193417/197278", mem)
	}
}

// FuzzSplitGlobalTid: any value splits without panic into either the bit
// form or pid and tid ids whose decimal digits concatenate to the value.
func FuzzSplitGlobalTid(f *testing.F) {
	for _, g := range []int64{0, 1, -1, 77, 1005, 1234567, 11814731181473, 830719689683849, 4398785246508220, 1 << 32, 1 << 62, -1 << 63} {
		f.Add(g)
	}
	f.Fuzz(func(t *testing.T, g int64) {
		pid, tid := splitGlobalTid(g)
		u := uint64(g)
		bitPid, bitTid := u>>32, u&0xffffffff
		if pid == bitPid && tid == bitTid {
			return
		}
		if g <= 0 || linuxID(bitPid) && linuxID(bitTid) {
			t.Fatalf("splitGlobalTid(%d) = %d, %d; want the bit form %d, %d", g, pid, tid, bitPid, bitTid)
		}
		if !linuxID(pid) || !linuxID(tid) || strconv.FormatUint(pid, 10)+strconv.FormatUint(tid, 10) != strconv.FormatUint(u, 10) {
			t.Fatalf("splitGlobalTid(%d) = %d, %d: neither the bit form nor a decimal split into ids", g, pid, tid)
		}
	})
}

func BenchmarkSplitGlobalTid(b *testing.B) {
	for _, c := range []struct {
		name string
		g    int64
	}{{"bit", 4398785246508220}, {"decimal", 11814731181490}, {"ambiguous", 12345678}} {
		b.Run(c.name, func(b *testing.B) {
			var sum uint64
			for b.Loop() {
				pid, tid := splitGlobalTid(c.g)
				sum += pid + tid
			}
			if sum == 0 {
				b.Fatal("no split")
			}
		})
	}
}
