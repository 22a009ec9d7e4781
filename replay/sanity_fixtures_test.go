package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSanityFixturesClean(t *testing.T) {
	var files []string
	for _, root := range []string{"../testdata/fixtures", "testdata"} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && (strings.HasSuffix(p, ".pickle") || strings.HasSuffix(p, ".pkl") || strings.HasSuffix(p, ".json")) {
				files = append(files, p)
			}
			return nil
		})
	}
	n := 0
	for _, p := range files {
		c, err := DecodeFile(p, Options{})
		if err != nil {
			continue
		}
		n++
		if s := Sanity(c.Snapshot); s != nil {
			t.Errorf("%s: %v", p, s)
		}
	}
	t.Logf("%d fixtures decoded", n)
}
