package importer

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// patchProgram is GNU patch, which every Diff must satisfy; under CI a
// missing patch fails rather than skips.
func patchProgram(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("patch")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("patch is not installed (apt-get install -y patch): %v", err)
		}
		t.Skipf("patch is not installed: %v", err)
	}
	return p
}

// applyPatch writes before as name under a fresh directory (nothing for
// a nil before), runs patch -p0 there with the diff on its standard input,
// and returns the file afterwards.
func applyPatch(t *testing.T, name string, before []byte, diff string) []byte {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		if err := os.WriteFile(path, before, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, patchProgram(t), "-p0", "--batch", "--no-backup-if-mismatch", "--reject-file=-")
	cmd.Dir, cmd.Stdin = dir, bytes.NewBufferString(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch -p0 refuses the diff: %v\n%s\n%s", err, out, diff)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return after
}

// TestDiffAppliesWithPatch: the real patch program applies every diff
// Diff writes to the original file and gives the edited bytes: an edit of
// a user's config, a file whose last line has no newline (on either
// side), a file with CRLF line ends, a new file, and a name with a space.
func TestDiffAppliesWithPatch(t *testing.T) {
	route := readSources(t, "envoy/route.yaml")[0].Data
	edited := bytes.Replace(route, []byte("num_retries: 2"), []byte("num_retries: 1\n    per_try_timeout: 0.5s"), 1)
	for _, tc := range []struct {
		name          string
		before, after []byte
	}{
		{"envoy/route.yaml", route, edited},
		{"end.yaml", []byte("a: 1\nb: 2"), []byte("a: 1\nb: 3")},
		{"gains-newline.yaml", []byte("a: 1\nb: 2"), []byte("a: 1\nb: 2\n")},
		{"loses-newline.yaml", []byte("a: 1\nb: 2\n"), []byte("a: 1\nb: 2")},
		{"crlf.yaml", []byte("a: 1\r\nb: 2\r\nc: 3\r\n"), []byte("a: 1\r\nb: 5\r\nc: 3\r\nd: 4\r\n")},
		{"new/virtualservice.yaml", nil, []byte("kind: VirtualService\nspec: {}\n")},
		{"my configs/route.yaml", []byte("x: 1\n"), []byte("x: 2\n")},
		{"top.yaml", []byte("b: 1\nc: 2\nd: 3\ne: 4\nf: 5\ng: 6\nh: 7\ni: 8\nj: 9\n"), []byte("a: 0\nb: 1\nc: 2\nd: 3\ne: 4\nf: 5\ng: 6\nh: 7\ni: 8\nj: 10\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff(tc.name, tc.before, tc.after)
			if d == "" {
				t.Fatal("no diff of two different files")
			}
			if got := applyPatch(t, tc.name, tc.before, d); !bytes.Equal(got, tc.after) {
				t.Errorf("patch gives\n%q\nwant\n%q\nfrom\n%s", got, tc.after, d)
			}
		})
	}
}
