package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// The heavy commands run in a companion binary, as git runs git-foo: the
// light retrystorm parses the command line, finds retrystorm-full and runs
// it with the same arguments, standard input and output, and exits with
// its status. So the demo's first `go run` compiles only the standard
// library and the YAML parser, and the lab's dependencies are compiled
// when the lab is first run.

// CompanionName is the companion binary's name (with .exe on Windows).
const CompanionName = "retrystorm-full"

// ModulePath is this module's path; a checkout is a directory tree whose
// go.mod declares it.
const ModulePath = "github.com/retrystorm/retrystorm"

// companionEnv is set in the companion's environment: a companion that
// lacks a heavy command (a bug) says so instead of looking for another.
const companionEnv = "RETRYSTORM_COMPANION"

// buildNotice is how long the companion's build may take before the user
// is told why nothing happens.
const buildNotice = time.Second

func runCompanion(ctx context.Context, inv *Invocation) error {
	if os.Getenv(companionEnv) != "" {
		return fmt.Errorf("this retrystorm has no %s command, and was itself started to run it: it was built from a table whose Heavy lacks it", inv.Name)
	}
	f := hostFinder(inv.Log())
	path, err := f.companion(ctx, inv.Name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, inv.argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, inv.Stdout, inv.Stderr
	cmd.Env = append(os.Environ(), companionEnv+"=1")
	// On an interrupt the companion gets the terminal's signal too; when
	// ctx ends otherwise, ask it to stop as the terminal would, and kill it
	// only if it does not.
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return exitStatus(ee.ExitCode())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", CompanionName, err)
	}
	return nil
}

// finder locates the companion; its fields are the outside world, so that
// the tests can stage every case.
type finder struct {
	executable func() (string, error)
	lookPath   func(string) (string, error)
	getwd      func() (string, error)
	cacheDir   func() (string, error)
	// version is this binary's module version, as debug.ReadBuildInfo
	// reports it.
	version string
	// build builds the companion from the checkout at root into out.
	build func(ctx context.Context, root, out string) error
	// log is told when the build takes longer than notice.
	log    io.Writer
	notice time.Duration
	// goos is runtime.GOOS.
	goos string
}

func hostFinder(log io.Writer) finder {
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
	}
	return finder{
		executable: os.Executable,
		lookPath:   exec.LookPath,
		getwd:      os.Getwd,
		cacheDir:   os.UserCacheDir,
		version:    version,
		build:      goBuild,
		log:        log,
		notice:     buildNotice,
		goos:       runtime.GOOS,
	}
}

// companion returns the path of the companion to run command with: the
// one beside this binary; else, when this binary was built from a working
// tree and the working directory is in a checkout of this module, one
// built from that checkout; else the one on the PATH.
func (f finder) companion(ctx context.Context, command string) (string, error) {
	name := CompanionName
	if f.goos == "windows" {
		name += ".exe"
	}
	self, err := f.executable()
	if err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		beside := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
			return beside, nil
		}
	}
	if !isRelease(f.version) {
		if root, ok := f.checkout(); ok {
			return f.buildFrom(ctx, root, name, command)
		}
	}
	if path, err := f.lookPath(name); err == nil {
		return path, nil
	}
	version := f.version
	if !isRelease(version) {
		version = "latest"
	}
	where := "beside this binary"
	if self != "" {
		where += " (in " + filepath.Dir(self) + ")"
	}
	return "", fmt.Errorf("%s runs in the companion binary %s, which links its heavier dependencies, and it is neither %s nor on the PATH. Install both binaries with\n\n    go install %s/cmd/...@%s\n\nor run retrystorm from a checkout of the repository (go run ./cmd/retrystorm %s)",
		command, CompanionName, where, ModulePath, version, command)
}

// checkout returns the root of the checkout of this module that holds the
// working directory.
func (f finder) checkout() (string, bool) {
	dir, err := f.getwd()
	if err != nil {
		return "", false
	}
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// modulePathOf reads the module path from a go.mod file, or "".
func modulePathOf(gomod string) string {
	fh, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(io.LimitReader(fh, 1<<20))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// buildFrom builds the companion from the checkout at root into the user's
// cache, where the go command leaves it alone when it is current, and says
// so on the log when that takes a while: the first build compiles the
// heavy dependencies.
func (f finder) buildFrom(ctx context.Context, root, name, command string) (string, error) {
	cache, err := f.cacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(cache, "retrystorm", "companion-"+hex.EncodeToString(sum[:6]), name)
	done, told := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(told)
		select {
		case <-done:
		case <-time.After(f.notice):
			fmt.Fprintf(f.log, "retrystorm: %s runs in %s; building it from this checkout (the first build compiles the lab's dependencies, Prometheus and protobuf: about half a minute on two cores; later builds take a second)\n", command, CompanionName)
		}
	}()
	err = f.build(ctx, root, out)
	close(done)
	<-told
	if err != nil {
		return "", fmt.Errorf("building %s from %s: %w", CompanionName, root, err)
	}
	return out, nil
}

// goBuild builds ./cmd/retrystorm-full of the checkout at root into out
// with the go command on the PATH: the one that runs `go run` in the
// checkout, so the same toolchain.
func goBuild(ctx context.Context, root, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", goBuildArgs(out)...)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// goBuildArgs are the go command's arguments that build the companion
// into out. -buildvcs=auto stamps it with the checkout's revision and
// version as the version command reports them (runVersion), as
// .ci/release does, even where GOFLAGS says -buildvcs=false: without it
// `retrystorm-full version` said "(devel)" of a build whose revision was
// known.
func goBuildArgs(out string) []string {
	return []string{"build", "-buildvcs=auto", "-o", out, "./cmd/" + CompanionName}
}

// isRelease reports whether v is a released version of the module (a tag
// such as v1.2.0), not "(devel)", a pseudo-version of a commit or a build
// of a modified working tree.
func isRelease(v string) bool {
	return strings.HasPrefix(v, "v") && !pseudoRev.MatchString(v) && !strings.Contains(v, "+")
}
