package full

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsNeverClobberInputs is issue 37's first defect: an output
// path that is one of the inputs, or an existing file that is not an
// earlier output of the same kind (the slip `check --sarif route.yaml
// cluster.yaml`), is refused with exit status 2 before anything runs, and
// the file is left as it was; a symbolic link at an output path is
// replaced, never followed; `-o -` is standard output.
func TestOutputsNeverClobberInputs(t *testing.T) {
	dir := t.TempDir()
	copyTo := func(name string) string {
		data, err := os.ReadFile(importerData(name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	route, cluster := copyTo("envoy/route.yaml"), copyTo("envoy/cluster.yaml")
	before, _ := os.ReadFile(route)
	for _, args := range [][]string{
		{"check", route, "--sarif", route},
		{"check", "--sarif", route, cluster}, // route.yaml is no longer an input, but is a config
		{"check", route, "--junit", cluster},
		{"import", route, "-o", route},
		{"check", route, "--emit-worst", route},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
		if now, _ := os.ReadFile(route); string(now) != string(before) {
			t.Fatalf("%q changed %s", args, route)
		}
	}
	// A link at the output path: the link is replaced, its target kept.
	link := filepath.Join(dir, "retrystorm.sarif")
	if err := os.Symlink(cluster, link); err != nil {
		t.Fatal(err)
	}
	clusterBefore, _ := os.ReadFile(cluster)
	if r := runCLI(t, "check", "--seeds", "1", "--out", t.TempDir(), route, "--sarif", link); r.code == 2 {
		t.Fatalf("check --sarif through a link to a file not checked: exit 2\n%s", r.stderr)
	}
	if now, _ := os.ReadFile(cluster); string(now) != string(clusterBefore) {
		t.Errorf("the SARIF was written through the link into %s", cluster)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("%s is still a link: %v", link, err)
	}
	// -o - is standard output, not a file named "-".
	t.Chdir(dir)
	if r := runCLI(t, "import", route, "-o", "-"); r.code != 0 || !strings.Contains(r.stdout, "fleets:") {
		t.Errorf("import -o -: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`import -o - wrote a file named "-"`)
	}
}
