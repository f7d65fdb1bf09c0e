package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
)

// stage is a world for the finder: a directory with this binary (and
// perhaps its companion), a working directory (perhaps in a checkout), a
// PATH (perhaps with a companion), and a build that records its calls.
type stage struct {
	bin, work, onPath string
	built             []string
	log               bytes.Buffer
}

func newStage(t *testing.T, beside, checkout bool, onPath bool) *stage {
	t.Helper()
	s := &stage{bin: t.TempDir(), work: t.TempDir()}
	touch := func(path string) {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	touch(filepath.Join(s.bin, "retrystorm"))
	if beside {
		touch(filepath.Join(s.bin, CompanionName))
	}
	if checkout {
		if err := os.WriteFile(filepath.Join(s.work, "go.mod"), []byte("// a checkout\nmodule "+ModulePath+"\n\ngo 1.26.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(s.work, "experiment")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		s.work = sub // the checkout is found from a subdirectory too
	}
	if onPath {
		s.onPath = filepath.Join(t.TempDir(), CompanionName)
		touch(s.onPath)
	}
	return s
}

func (s *stage) finder(t *testing.T, version string, buildTakes time.Duration) finder {
	cache := t.TempDir()
	return finder{
		executable: func() (string, error) { return filepath.Join(s.bin, "retrystorm"), nil },
		lookPath: func(name string) (string, error) {
			if s.onPath != "" && name == CompanionName {
				return s.onPath, nil
			}
			return "", exec.ErrNotFound
		},
		getwd:    func() (string, error) { return s.work, nil },
		cacheDir: func() (string, error) { return cache, nil },
		version:  version,
		build: func(_ context.Context, root, out string) error {
			s.built = append(s.built, root)
			time.Sleep(buildTakes)
			return nil
		},
		log:    &s.log,
		notice: 50 * time.Millisecond,
		goos:   "linux",
	}
}

// TestCompanionIsFound: the companion beside this binary comes first; a
// binary built from a working tree, run in a checkout, builds it from the
// checkout (and says so when that takes a while); then the PATH; and
// without any, the error says how to install it.
func TestCompanionIsFound(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name                     string
		beside, checkout, onPath bool
		version                  string
		want                     string // "beside", "built", "path" or an error's text
	}{
		{"installed pair", true, true, true, "v1.2.0", "beside"},
		{"go run in a checkout", false, true, true, "(devel)", "built"},
		{"a commit's build in a checkout", false, true, false, "v0.0.0-20261130212900-0123456789ab+dirty", "built"},
		{"a release in a checkout", false, true, true, "v1.2.0", "path"},
		{"go run elsewhere", false, false, true, "(devel)", "path"},
		{"nothing, a release", false, false, false, "v1.2.0", "go install " + ModulePath + "/cmd/...@v1.2.0"},
		{"nothing, go run", false, false, false, "(devel)", "go install " + ModulePath + "/cmd/...@latest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStage(t, c.beside, c.checkout, c.onPath)
			f := s.finder(t, c.version, 0)
			got, err := f.companion(ctx, "lab")
			switch c.want {
			case "beside":
				if err != nil || got != filepath.Join(s.bin, CompanionName) {
					t.Errorf("got %q, %v; want the one beside", got, err)
				}
			case "built":
				if err != nil || len(s.built) != 1 || filepath.Base(got) != CompanionName {
					t.Errorf("got %q, %v, built from %q; want one built from the checkout", got, err, s.built)
				}
				if root := filepath.Dir(s.work); len(s.built) == 1 && s.built[0] != root {
					t.Errorf("built from %s, want the checkout's root %s", s.built[0], root)
				}
			case "path":
				if err != nil || got != s.onPath {
					t.Errorf("got %q, %v; want the one on the PATH", got, err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "lab runs in the companion binary "+CompanionName) {
					t.Errorf("got %q, %v; want an error saying %q", got, err, c.want)
				}
			}
			if c.want != "built" && len(s.built) > 0 {
				t.Errorf("built from %q, but should not have", s.built)
			}
		})
	}
}

// TestCompanionBuildSaysWhy: a build that takes a while is announced on
// the log, once; a quick one is not.
func TestCompanionBuildSaysWhy(t *testing.T) {
	for _, slow := range []bool{false, true} {
		s := newStage(t, false, true, false)
		took := time.Duration(0)
		if slow {
			took = 300 * time.Millisecond
		}
		if _, err := s.finder(t, "(devel)", took).companion(context.Background(), "lab"); err != nil {
			t.Fatal(err)
		}
		said := strings.Count(s.log.String(), "building it from this checkout")
		if slow && said != 1 || !slow && said != 0 {
			t.Errorf("a build of %s was announced %d times:\n%s", took, said, s.log.String())
		}
	}
}

// buildCommand builds a main package of this module into dir, as
// go build does (-buildvcs=false: as go run, a build from a working tree).
//
// It builds as .ci/release and deploy/Dockerfile do (sharedBuild), so that
// the go command compiles the commands' packages once for all the tests
// that build them (TestDockerfileBuilds, TestReleaseArchive, TestGoInstall
// and this package's), not once per set of flags: a cold build of the
// companion's dependencies is a minute of two cores.
func buildCommand(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg)+exeSuffix())
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, "./"+pkg)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), sharedBuild()...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// sharedBuild is the environment of a go build that compiles what
// .ci/release and deploy/Dockerfile compile (CGO_ENABLED=0, -trimpath;
// their -ldflags=-s and -buildvcs only change the link), to be added to
// the test's own.
func sharedBuild() []string {
	return []string{"CGO_ENABLED=0", "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath")}
}

// copyFile copies the executable from to to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func exeSuffix() string {
	if filepath.Separator == '\\' {
		return ".exe"
	}
	return ""
}

// execute runs bin with args in dir, with env added, and returns its
// exit status and output.
func execute(t *testing.T, dir string, env []string, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// TestCompanionDispatch runs real binaries: the light retrystorm hands lab
// to the retrystorm-full beside it, exit status and all; alone and
// outside a checkout it says how to install the companion; alone in a
// checkout it builds the companion with the go command and runs it.
func TestCompanionDispatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		servertest.Missing(t, "no go command")
	}
	pair, alone, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	light := buildCommand(t, pair, "cmd/retrystorm")
	buildCommand(t, pair, "cmd/"+CompanionName)
	lone := filepath.Join(alone, filepath.Base(light))
	copyFile(t, light, lone)
	noPath := []string{"PATH=" + filepath.Join(elsewhere, "empty"), "XDG_CACHE_HOME=" + t.TempDir()}

	if r := execute(t, elsewhere, noPath, light, "lab", "--print-config"); r.code != 0 || !strings.Contains(r.stdout, "name: storm") {
		t.Errorf("lab --print-config through the companion beside: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := execute(t, elsewhere, noPath, light, "lab", "--tick", "1ms"); r.code != 2 || !strings.Contains(r.stderr, "storm needs a tick from") {
		t.Errorf("a usage error in the companion: exit %d, want 2\n%s", r.code, r.stderr)
	}
	if r := execute(t, elsewhere, noPath, light, "lab", "--nosuch"); r.code != 2 || !strings.Contains(r.stderr, "unknown flag --nosuch") {
		t.Errorf("a usage error before the companion: exit %d, want 2\n%s", r.code, r.stderr)
	}
	r := execute(t, elsewhere, noPath, lone, "lab", "--print-config")
	if r.code != 1 || !strings.Contains(oneLine(r.stderr), "go install "+ModulePath+"/cmd/...@latest") || r.stdout != "" {
		t.Errorf("alone, outside a checkout: exit %d, want 1 and how to install\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := widest(r.stderr); n > 80 {
		t.Errorf("a line of %d columns:\n%s", n, r.stderr)
	}
	cache := t.TempDir()
	r = execute(t, moduleRoot(t), append(sharedBuild(), "XDG_CACHE_HOME="+cache), lone, "lab", "--print-config")
	if r.code != 0 || !strings.Contains(r.stdout, "name: storm") {
		t.Errorf("alone, in the checkout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if found, _ := filepath.Glob(filepath.Join(cache, "retrystorm", "companion-*", CompanionName+exeSuffix())); len(found) != 1 {
		t.Errorf("the companion built from the checkout is not in the cache: %q", found)
	}
}
