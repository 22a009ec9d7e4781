package memusage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: arbitrary bytes never panic; an accepted file has torch_npu's
// header, at most MaxModules named modules and figures within bounds, and
// a refusal is one line naming the file.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.csv")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("moduleName,curMemSize(MB),memPeakSize(MB)\n\"a\"\"b\",1.5,2\n"))
	f.Add([]byte("\xef\xbb\xbf\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("f.csv", data)
		if err != nil {
			s := err.Error()
			if !strings.HasPrefix(s, "f.csv") || strings.Contains(s, "\n") {
				t.Fatalf("error %q", s)
			}
			return
		}
		if len(m.Modules) > MaxModules {
			t.Fatalf("%d modules", len(m.Modules))
		}
		for _, x := range m.Modules {
			if x.Name == "" || len(x.Name) > MaxNameBytes || x.Cur < 0 || x.Peak < 0 || x.Cur > maxMB*MiB || x.Peak > maxMB*MiB {
				t.Fatalf("module %+v", x)
			}
		}
	})
}
