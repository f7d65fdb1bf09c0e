package layering

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// floors are the module's floors, lowest first, by path prefix (the
// longest that matches wins). docs/architecture.md draws them; a package
// none matches fails the test until it is given one here and there.
var floors = []struct {
	prefix string
	floor  int
}{
	// 0, the ground: the library, and helpers any floor may use.
	{"resil", 0}, {"internal", 0}, {"giveup", 0},
	// 1, the scenario file: what every floor above reads and writes, and
	// the example scenario files.
	{"scenario", 1}, {"examples", 1},
	// 2, the engines: the origin, the simulator, the model, grids,
	// reports.
	{"origin", 2}, {"sim", 2}, {"model", 2}, {"grid", 2}, {"report", 2},
	// 3, what runs on the engines or feeds them: experiments, importers,
	// calibration.
	{"experiment", 3}, {"importer", 3}, {"calibrate", 3},
	// 4, the verdict engine, the lab, the page.
	{"verdict", 4}, {"lab", 4}, {"page", 4},
	// 5, the user's files and metrics, judged.
	{"userconfig", 5}, {"replay", 5},
	// 6, the commands; 7, every main package (set by its name).
	{"cmd", 6}, {"deploy", 6},
}

const top = 7 // the floor of a main package

// pkg is a package of the module: its path in the module ("sim"), and
// the module's packages and the third-party ones it imports (tests
// apart).
type pkg struct {
	path  string
	main  bool
	mod   []string // in the module, as paths in it
	other []string // third-party (not the standard library's)
}

func floorOf(p pkg) (int, bool) {
	if p.main {
		return top, true
	}
	best, n := -1, -1
	for _, f := range floors {
		if (p.path == f.prefix || strings.HasPrefix(p.path, f.prefix+"/")) && len(f.prefix) > n {
			best, n = f.floor, len(f.prefix)
		}
	}
	return best, best >= 0
}

// under reports whether path is dir or below it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// violations are the imports of pkgs that break the floors:
//   - an import to a higher floor;
//   - resil and its sub-packages import nothing of the module outside
//     resil/, and its core (all but the adapters resil/resilgrpc,
//     resilhttp, resilotel, resilprom and theirs) nothing outside the
//     standard library;
//   - nothing outside cmd/ imports cmd/..., and nothing imports a main
//     package.
func violations(pkgs []pkg) []string {
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	var out []string
	for _, p := range pkgs {
		fp, ok := floorOf(p)
		if !ok {
			out = append(out, fmt.Sprintf("%s has no floor: give it one in floors (internal/layering) and in docs/architecture.md", p.path))
			continue
		}
		for _, q := range p.mod {
			imp, known := byPath[q]
			if !known {
				imp = pkg{path: q}
			}
			fq, ok := floorOf(imp)
			switch {
			case imp.main:
				out = append(out, fmt.Sprintf("%s imports %s, a main package", p.path, q))
			case ok && fq > fp:
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d): an import runs upward", p.path, fp, q, fq))
			case under(q, "cmd") && !under(p.path, "cmd"):
				out = append(out, fmt.Sprintf("%s imports %s: only the commands import cmd/...", p.path, q))
			case under(p.path, "resil") && !under(q, "resil"):
				out = append(out, fmt.Sprintf("%s imports %s: resil imports nothing of the module outside resil/", p.path, q))
			}
		}
		if under(p.path, "resil") && !adapter(p.path) && len(p.other) > 0 {
			out = append(out, fmt.Sprintf("%s imports %s: resil's core imports only the standard library (adapters go in resil/resilNAME)", p.path, strings.Join(p.other, ", ")))
		}
	}
	return out
}

// adapter reports whether path is one of resil's adapters to other
// libraries (resil/resilgrpc, resilhttp...), or below one.
func adapter(path string) bool {
	parts := strings.Split(path, "/")
	return len(parts) > 1 && parts[0] == "resil" && strings.HasPrefix(parts[1], "resil")
}

// modulePackages reads the module's packages under root, with the
// imports of their non-test files under any of ctxs (the host's build,
// and js/wasm for the page's module).
func modulePackages(root, module string, ctxs ...build.Context) ([]pkg, error) {
	var out []pkg
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); dir != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); dir != root && err == nil {
			return filepath.SkipDir // another module (bench)
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		p := pkg{path: filepath.ToSlash(rel)}
		found := false
		for _, ctx := range ctxs {
			bp, err := ctx.ImportDir(dir, 0)
			if _, none := errors.AsType[*build.NoGoError](err); none {
				continue
			}
			if err != nil {
				return err
			}
			found, p.main = true, p.main || bp.Name == "main"
			for _, imp := range bp.Imports {
				switch {
				case imp == module || strings.HasPrefix(imp, module+"/"):
					p.mod = append(p.mod, strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"))
				case strings.Contains(strings.Split(imp, "/")[0], "."):
					p.other = append(p.other, imp)
				}
			}
		}
		if found {
			slices.Sort(p.mod)
			slices.Sort(p.other)
			p.mod, p.other = slices.Compact(p.mod), slices.Compact(p.other)
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// TestNoImportRunsUpward reads every package of the module and fails on
// each import that breaks the floors.
func TestNoImportRunsUpward(t *testing.T) {
	root := filepath.Join("..", "..")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(mod), "\n")
	module, ok := strings.CutPrefix(strings.TrimSpace(first), "module ")
	if !ok {
		t.Fatalf("go.mod: first line %q is not the module's", first)
	}
	host := build.Default
	wasm := build.Default
	wasm.GOOS, wasm.GOARCH = "js", "wasm"
	pkgs, err := modulePackages(root, module, host, wasm)
	if err != nil {
		t.Fatal(err)
	}
	// A walk that found little read the wrong tree: the test would pass
	// having checked nothing.
	for _, want := range []string{"resil", "scenario", "sim", "verdict", "cmd/retrystorm"} {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.path == want }) {
			t.Fatalf("package %s not found under %s: the walk read the wrong tree", want, root)
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestViolations shows that each rule fails on a graph that breaks it,
// and passes the same graph without the offending import.
func TestViolations(t *testing.T) {
	base := []pkg{
		{path: "resil", mod: []string{"resil/internal/window"}},
		{path: "resil/internal/window"},
		{path: "resil/resilgrpc", mod: []string{"resil"}, other: []string{"google.golang.org/grpc"}},
		{path: "internal/safetext"},
		{path: "scenario", mod: []string{"internal/safetext", "resil"}},
		{path: "sim", mod: []string{"scenario"}},
		{path: "verdict", mod: []string{"sim"}},
		{path: "cmd/internal/cli", mod: []string{"verdict"}},
		{path: "cmd/retrystorm", main: true, mod: []string{"cmd/internal/cli"}},
	}
	if v := violations(base); len(v) > 0 {
		t.Fatalf("the base graph breaks no rule, got %q", v)
	}
	cases := []struct {
		name string
		edit func([]pkg) []pkg
		want string
	}{
		{"upward", func(ps []pkg) []pkg { ps[5].mod = append(ps[5].mod, "verdict"); return ps }, "sim (floor 2) imports verdict (floor 4): an import runs upward"},
		{"internal up", func(ps []pkg) []pkg { ps[3].mod = append(ps[3].mod, "scenario"); return ps }, "internal/safetext (floor 0) imports scenario (floor 1)"},
		{"resil out of resil", func(ps []pkg) []pkg { ps[0].mod = append(ps[0].mod, "internal/safetext"); return ps }, "resil imports internal/safetext: resil imports nothing of the module outside resil/"},
		{"resil third-party", func(ps []pkg) []pkg { ps[0].other = []string{"golang.org/x/time/rate"}; return ps }, "resil's core imports only the standard library"},
		{"cmd imported", func(ps []pkg) []pkg {
			return append(ps, pkg{path: "cmd/internal/kit"}, pkg{path: "internal/kit2", mod: []string{"cmd/internal/kit"}})
		}, "internal/kit2 (floor 0) imports cmd/internal/kit (floor 6)"},
		{"main imported", func(ps []pkg) []pkg { ps[7].mod = append(ps[7].mod, "cmd/retrystorm"); return ps }, "cmd/internal/cli imports cmd/retrystorm, a main package"},
		{"no floor", func(ps []pkg) []pkg { return append(ps, pkg{path: "newthing"}) }, "newthing has no floor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := make([]pkg, len(base))
			for i, p := range base {
				p.mod, p.other = slices.Clone(p.mod), slices.Clone(p.other)
				ps[i] = p
			}
			v := violations(c.edit(ps))
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("want a violation %q, got %q", c.want, v)
			}
		})
	}
}
