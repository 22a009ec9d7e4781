package replay

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestSharedFramesLists: a frames list the pickle memoizes once and refers
// to again (as torch does for free_requested / free_completed) decodes to
// one stack; the same list object reused as another kind of list is a
// clear error, whichever use comes first. Python's pickle writes the input.
func TestSharedFramesLists(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	gen := func(t *testing.T, expr string) []byte {
		t.Helper()
		src := "import pickle,sys\nF={'filename':'a.py','line':3,'name':'f'}\nL=[F,{'filename':'b.py','line':4,'name':'g'}]\nE=[]\n" +
			"seg=lambda **k: dict(device=0,address=4096,total_size=8192,allocated_size=0,active_size=0,requested_size=0,stream=0,segment_type='large',**k)\n" +
			"ent=lambda a,fr: {'action':a,'addr':4096,'size':512,'stream':0,'time_us':1,'frames':fr}\n" +
			"sys.stdout.buffer.write(pickle.dumps(" + expr + ",protocol=4))"
		out, err := exec.Command(py, "-c", src).Output()
		if err != nil {
			t.Fatalf("python: %v", err)
		}
		return out
	}
	t.Run("shared", func(t *testing.T) {
		data := gen(t, "{'segments':[seg(blocks=[],frames=L)],'device_traces':[[ent('alloc',L),ent('free_requested',L),ent('free_completed',L),ent('alloc',E),ent('free_requested',E)]]}")
		c, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		tr := c.Snapshot.DeviceTraces[0]
		id := c.Snapshot.Segments[0].Frames
		if id == 0 || len(c.Snapshot.Stacks[id]) != 2 || c.Snapshot.Stacks[id][1].Filename != "b.py" {
			t.Fatalf("segment stack %d: %+v", id, c.Snapshot.Stacks)
		}
		for i, want := range []int{int(id), int(id), int(id), 0, 0} {
			if int(tr[i].Frames) != want {
				t.Fatalf("entry %d: stack %d, want %d", i, tr[i].Frames, want)
			}
		}
	})
	for _, tc := range []struct{ name, expr, want string }{
		{"frames-then-blocks", "{'segments':[seg(frames=E,blocks=E)]}", "got a list of frames"},
		{"blocks-then-frames", "{'segments':[seg(blocks=E,frames=E)]}", "want a list of frames"},
		{"frames-then-traces", "{'segments':[seg(blocks=[],frames=E)],'device_traces':[E]}", "list of frames"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := gen(t, tc.expr)
			_, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
