package page

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/retrystorm/retrystorm/report"
)

// WasmPackage is the main package compiled to WebAssembly for the page.
const WasmPackage = modulePath + "/page/wasm"

const modulePath = "github.com/retrystorm/retrystorm"

// The generated assets, as `go generate ./page` writes them. They are
// committed, so that every build of the module embeds them, `go install`
// of a version included (see assets/README.md); a test rebuilds the module
// and fails while the committed one is stale.
const (
	AssetsDir     = "assets"
	ModuleFile    = "retrystorm.wasm.gz"
	WasmExecFile  = "wasm_exec.js"
	ToolchainFile = "toolchain.txt"
)

//go:embed assets
var assets embed.FS

// Assets are what the page inlines besides its own HTML, CSS and script.
type Assets struct {
	// Module is the gzipped WebAssembly module of WasmPackage. The page
	// inflates it with the browser's DecompressionStream.
	Module []byte
	// WasmExec is wasm_exec.js from the toolchain that built Module: the
	// JavaScript half of Go's js/wasm port, which must match it.
	WasmExec []byte
	// Toolchain is the version of the go command that built Module
	// (go1.26.8): another toolchain builds other bytes from the same
	// source.
	Toolchain string
}

// Embedded returns the assets `go generate ./page` left in this binary,
// and reports false when there are none.
func Embedded() (Assets, bool) {
	m, err1 := fs.ReadFile(assets, AssetsDir+"/"+ModuleFile)
	w, err2 := fs.ReadFile(assets, AssetsDir+"/"+WasmExecFile)
	v, err3 := fs.ReadFile(assets, AssetsDir+"/"+ToolchainFile)
	if err1 != nil || err2 != nil || err3 != nil {
		return Assets{}, false
	}
	return Assets{Module: m, WasmExec: w, Toolchain: strings.TrimSpace(string(v))}, true
}

// BuildAssets compiles WasmPackage with the go command on the PATH, run in
// dir, which must lie in a module that has the package (this repository,
// or one that requires it). The build is reproducible: -trimpath and
// -buildvcs=false keep the paths and the VCS state of the checkout out of
// it, and the variables that change what the go command builds (GOFLAGS,
// GOWASM, GOEXPERIMENT) are cleared, so the same source and toolchain give
// the same bytes, which is how the tests know the embedded module is
// current.
func BuildAssets(ctx context.Context, dir string) (Assets, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return Assets{}, errors.New("page: building the WebAssembly module needs the go command, and none is on the PATH")
	}
	tmp, err := os.MkdirTemp("", "retrystorm-page-")
	if err != nil {
		return Assets{}, fmt.Errorf("page: %w", err)
	}
	defer os.RemoveAll(tmp)
	wasmPath := filepath.Join(tmp, "retrystorm.wasm")
	env := append(os.Environ(), "GOOS=js", "GOARCH=wasm", "GOFLAGS=", "GOWASM=", "GOEXPERIMENT=", "CGO_ENABLED=0")
	goTool := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = dir
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("page: go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	// Inlining only where the simulation spends its time (random numbers,
	// sim, origin, resil's core): inlined everywhere, the module weighed
	// 2.13 MiB gzipped, over the 2 MiB a committed file may weigh. The
	// runtime is not inlined either: that saves 37 KB gzipped, and the
	// storm scenario under Node took the same CPU time with and without.
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-gcflags=all=-l"}
	for _, hot := range []string{"math", "math/bits", "math/rand/v2", "internal/chacha8rand",
		modulePath + "/sim", modulePath + "/origin", modulePath + "/resil"} {
		args = append(args, "-gcflags="+hot+"=")
	}
	if _, err := goTool(append(args, "-o", wasmPath, WasmPackage)...); err != nil {
		return Assets{}, err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return Assets{}, fmt.Errorf("page: %w", err)
	}
	// The GOROOT and version of the toolchain that just built the module,
	// which need not be the one this program was built with.
	goEnv, err := goTool("env", "GOROOT", "GOVERSION")
	if err != nil {
		return Assets{}, err
	}
	vars := strings.Fields(string(goEnv))
	if len(vars) != 2 {
		return Assets{}, fmt.Errorf("page: go env GOROOT GOVERSION printed %q", goEnv)
	}
	wasmExec, err := os.ReadFile(filepath.Join(vars[0], "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return Assets{}, fmt.Errorf("page: wasm_exec.js of the toolchain: %w", err)
	}
	module, err := gzipBytes(wasm)
	if err != nil {
		return Assets{}, err
	}
	return Assets{Module: module, WasmExec: wasmExec, Toolchain: vars[1]}, nil
}

// gzipBytes compresses b with no name and no time in the header, so the
// same input always gives the same output.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteAssets writes a into dir under the names Embedded reads, each file
// to a temporary name first and renamed, so an interrupted `go generate`
// never leaves half a module to embed.
func WriteAssets(dir string, a Assets) error {
	if err := report.WriteFileAtomic(filepath.Join(dir, ModuleFile), a.Module); err != nil {
		return err
	}
	if err := report.WriteFileAtomic(filepath.Join(dir, WasmExecFile), a.WasmExec); err != nil {
		return err
	}
	return report.WriteFileAtomic(filepath.Join(dir, ToolchainFile), []byte(a.Toolchain+"\n"))
}
