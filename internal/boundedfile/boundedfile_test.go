package boundedfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil { // sparse: costs nothing
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name  string
		path  string
		limit int64
		is    error  // nil: read
		msg   string // in the error
	}{
		{"at the limit", write("ok", 10), 10, nil, ""},
		{"empty", write("empty", 0), 10, nil, ""},
		{"a byte over", write("over", 11), 10, ErrTooLarge, "the file is too large (11 bytes; at most 10)"},
		{"3 GiB, sparse", write("huge", 3<<30), 1 << 20, ErrTooLarge, "(3221225472 bytes; at most 1048576)"},
		{"a directory", dir, 10, ErrDirectory, "is a directory"},
		{"missing", filepath.Join(dir, "nope"), 10, fs.ErrNotExist, "cannot read the file: no such file or directory"},
	} {
		data, err := Read(c.path, c.limit)
		switch {
		case c.is == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.is != nil && (!errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg)):
			t.Errorf("%s: error %v, want %v saying %q", c.name, err, c.is, c.msg)
		case c.is != nil && data != nil:
			t.Errorf("%s: %d bytes returned with the error", c.name, len(data))
		case c.is == nil && err == nil:
			if fi, _ := os.Stat(c.path); int64(len(data)) != fi.Size() {
				t.Errorf("%s: read %d bytes of %d", c.name, len(data), fi.Size())
			}
		}
		if err != nil && strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %q names the file: the caller does", c.name, err)
		}
	}
}
