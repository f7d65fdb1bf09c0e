package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: an output path that is an input (even through a link) is
// refused; an existing file of another kind is refused; an earlier
// output of the same kind, a new file and a link are written.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	route := write("route.yaml", "name: local_route\nvirtual_hosts: []\n")
	sarif := write("old.sarif", `{"$schema": "x", "version": "2.1.0", "runs": []}`)
	link := filepath.Join(dir, "link.sarif")
	if err := os.Symlink(route, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		inputs []string
		want   string // "" for no error
	}{
		{route, []string{route}, "inputs"},
		{link, []string{route}, "inputs"},  // a link to an input is the input
		{route, nil, "is not a SARIF log"}, // a config, not an earlier SARIF
		{sarif, []string{route}, ""},       // an earlier SARIF
		{filepath.Join(dir, "new.sarif"), []string{route}, ""},
		{dir, nil, "directory"},
	} {
		err := Check(c.path, SARIF, c.inputs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it written", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error about %q", c.path, err, c.want)
		}
	}
	if err := Check(route, SARIF, []string{route}); !errors.Is(err, ErrInput) {
		t.Errorf("an input: %v, want ErrInput", err)
	}
}

// TestWriteReplacesALink: a symbolic link at the output path (one
// committed in a pull request, say) is replaced by the file, and the
// file it pointed at is left as it was.
func TestWriteReplacesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "retrystorm.sarif")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, SARIF, []byte(`{"version": "2.1.0", "runs": []}`), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me" {
		t.Errorf("the link's target became %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("the link is still a link: %v", err)
	}
}
