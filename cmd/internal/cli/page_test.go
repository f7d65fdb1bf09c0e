package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/page"
)

func TestPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.html")
	r := runCLI(t, "page", "-o", path)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, path) {
		t.Errorf("stdout %q does not say where the page is", r.stdout)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) >= page.MaxBytes {
		t.Errorf("the page is %d bytes, want under %d", len(doc), page.MaxBytes)
	}
	for _, want := range []string{"<!doctype html>", `id="module"`, "DecompressionStream", `"name":"sweep"`} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestPageUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"page", "extra"}, "page takes no arguments"},
		{[]string{"page", "--json"}, "unknown flag --json (it takes -o)"},
		{[]string{"page", "--config", "x.yaml"}, "unknown flag --config (it takes -o)"},
		{[]string{"page", "-o"}, "flag needs an argument: -o"},
		{[]string{"page", "-o", ""}, `-o "": needs a file name`},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 || !strings.Contains(oneLine(r.stderr), c.want) || r.stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2 and %q", c.args, r.code, r.stderr, r.stdout, c.want)
		}
	}
}

func TestPageHelp(t *testing.T) {
	for _, args := range [][]string{{"page", "--help"}, {"help", "page"}} {
		r := runCLI(t, args...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d: %s", args, r.code, r.stderr)
		}
		for _, want := range []string{"Usage: retrystorm page", "-o FILE", "retrystorm.html", "WebAssembly", "go generate ./page"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q: help lacks %q:\n%s", args, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "-json") {
			t.Errorf("%q: help offers the experiments' --json, which page does not take", args)
		}
	}
	if r := runCLI(t, "help"); !strings.Contains(r.stdout, "\n  page ") {
		t.Errorf("the command list lacks page:\n%s", r.stdout)
	}
}
