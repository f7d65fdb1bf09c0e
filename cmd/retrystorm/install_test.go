package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/page"
)

// TestGoInstall installs retrystorm the way `go install
// github.com/retrystorm/retrystorm/cmd/...@version` does, from the module
// as a proxy serves it: the files git tracks or would track (none that it
// ignores, no .git), zipped into a file:// GOPROXY at a pseudo-version, and
// the dependencies from the local module cache, so that nothing is
// fetched. Then, from a directory outside any checkout, the installed
// retrystorm writes a working page (the module it embeds is the committed
// one), says its version, and runs a heavy command through the companion
// installed beside it.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries from a module zip; skipped with -short")
	}
	need := func(tool string) string {
		p, err := exec.LookPath(tool)
		if err != nil {
			servertest.Missing(t, "no %s command, so go install is not tested: %v", tool, err)
		}
		return p
	}
	goCmd, gitCmd := need("go"), need("git")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command(gitCmd, args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			servertest.Missing(t, "not a git checkout (git %s: %v), so the module's files are unknown", strings.Join(args, " "), err)
		}
		return string(out)
	}
	head := strings.Fields(git("log", "-1", "--format=%H %ct"))
	secs, _ := strconv.ParseInt(head[1], 10, 64)
	when := time.Unix(secs, 0).UTC()
	version := "v0.0.0-" + when.Format("20060102150405") + "-" + head[0][:12]
	files := strings.Split(strings.TrimRight(git("ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00"), "\x00")

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	writeModule(t, proxy, root, version, when, files)

	modcache := filepath.Join(tmp, "modcache")
	gobin := filepath.Join(tmp, "bin")
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(goEnv(t, goCmd, "GOMODCACHE"), "cache", "download")),
		"GOMODCACHE="+modcache,
		"GOBIN="+gobin,
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		// As .ci/release and deploy/Dockerfile build (-trimpath,
		// CGO_ENABLED=0): a path-independent build compiles the
		// dependencies in the new module cache as those tests and
		// cmd/internal/cli's compile them from the checkout, so the
		// go command compiles them once for all (a minute of two
		// cores), and what is tested is the module's files, not the
		// flags.
		"CGO_ENABLED=0",
		// The checksum database is not consulted (the test makes no
		// request to the network): the module at its made-up version is
		// in no database, and its dependencies are checked against its
		// go.sum.
		"GONOSUMDB="+cli.ModulePath,
		"GONOSUMCHECK=1",
		"GOSUMDB=off",
		"GOTOOLCHAIN=local",
		"GOWORK=off",
	)
	install := exec.Command(goCmd, "install", cli.ModulePath+"/cmd/...@"+version)
	install.Dir = tmp // outside the checkout
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}

	checkInstalled(t, gobin, tmp, version, head[0][:12])
}

// checkInstalled runs the retrystorm installed in bin, from a directory
// of tmp outside any checkout and with no go command on the PATH: it
// writes a page that carries the committed module, says its version
// (when version is not ""; and its revision, when rev is not ""), and
// runs a heavy command through the companion beside it.
func checkInstalled(t *testing.T, bin, tmp, version, rev string) {
	t.Helper()
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "retrystorm"+exe()), args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(tmp, "empty"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}

	out, errs, code := run("page", "-o", "page.html")
	if code != 0 {
		t.Fatalf("page: exit %d\n%s%s", code, out, errs)
	}
	doc, err := os.ReadFile(filepath.Join(work, "page.html"))
	if err != nil {
		t.Fatal(err)
	}
	emb, ok := page.Embedded()
	if !ok {
		t.Fatal("this checkout has no module in page/assets")
	}
	if !bytes.Contains(doc, []byte(base64.StdEncoding.EncodeToString(emb.Module))) {
		t.Error("the installed retrystorm's page does not carry the committed module")
	}
	if len(doc) >= page.MaxBytes || !bytes.Contains(doc, []byte(`id="panel-data"`)) {
		t.Errorf("the page is %d bytes and lacks its panels", len(doc))
	}

	out, _, code = run("version")
	if code != 0 || !strings.HasPrefix(out, "retrystorm ") || version != "" && !strings.HasPrefix(out, "retrystorm "+version+"\n") || rev != "" && !strings.Contains(out, "revision: "+rev) {
		t.Errorf("version: exit %d:\n%s", code, out)
	}

	out, errs, code = run("lab", "--print-config")
	if code != 0 || !strings.Contains(out, "name: storm") {
		t.Errorf("lab --print-config through the installed companion: exit %d\n%s%s", code, out, errs)
	}
}

// TestReleaseArchive builds this platform's release archive with the
// release script, as CI does, checks its checksum, and uses the binaries
// it holds outside the checkout.
func TestReleaseArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release binaries; skipped with -short")
	}
	for _, tool := range []string{"bash", "tar", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			servertest.Missing(t, "no %s, so the release script is not tested", tool)
		}
	}
	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")
	script := exec.Command("bash", filepath.Join("..", "..", ".ci", "release"), "--snapshot", dist)
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf(".ci/release --snapshot: %v\n%s", err, out)
	}
	name := "retrystorm_snapshot_" + runtime.GOOS + "_" + runtime.GOARCH
	archive, err := os.ReadFile(filepath.Join(dist, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x  %s.tar.gz", sha256.Sum256(archive), name); !strings.Contains(string(sums), want) {
		t.Errorf("SHA256SUMS lacks %q:\n%s", want, sums)
	}
	extract(t, archive, tmp)
	for _, f := range []string{"README.md", "CHANGELOG.md", "retrystorm-full" + exe()} {
		if _, err := os.Stat(filepath.Join(tmp, name, f)); err != nil {
			t.Errorf("the archive lacks %s", f)
		}
	}
	checkInstalled(t, filepath.Join(tmp, name), tmp, "", "")
}

// extract unpacks a .tar.gz of regular files and directories into dir.
func extract(t *testing.T, archive []byte, dir string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("the archive holds %q, outside its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, os.FileMode(h.Mode)&0o755|0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("the archive holds %q of type %c", h.Name, h.Typeflag)
		}
	}
}

func exe() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

func goEnv(t *testing.T, goCmd, name string) string {
	out, err := exec.Command(goCmd, "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// writeModule writes the module at root, version v, as a GOPROXY serves
// it: @v/list, .info, .mod and the zip of files (paths relative to root),
// without the nested modules, whose files are not the module's.
func writeModule(t *testing.T, proxy, root, v string, when time.Time, files []string) {
	t.Helper()
	dir := filepath.Join(proxy, filepath.FromSlash(cli.ModulePath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nested := map[string]bool{}
	for _, f := range files {
		if path.Base(f) == "go.mod" && path.Dir(f) != "." {
			nested[path.Dir(f)] = true
		}
	}
	inNested := func(f string) bool {
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			if nested[d] {
				return true
			}
		}
		return false
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	for _, f := range files {
		if f == "" || inNested(f) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree, not yet in git
			}
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue // module zips hold regular files only
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(cli.ModulePath + "@" + v + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": v, "Time": when})
	for name, data := range map[string][]byte{
		"list":      []byte(v + "\n"),
		v + ".info": info,
		v + ".mod":  gomod,
		v + ".zip":  zbuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(fmt.Errorf("proxy: %w", err))
		}
	}
}
