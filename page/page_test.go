package page

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
)

// The module, built once for every test of the package that needs it.
var fresh struct {
	once   sync.Once
	assets Assets
	err    error
}

// freshAssets builds the module from the current source, as `go generate
// ./page` and `retrystorm page` do.
func freshAssets(t *testing.T) Assets {
	t.Helper()
	fresh.once.Do(func() {
		fresh.assets, fresh.err = BuildAssets(context.Background(), ".")
	})
	if fresh.err != nil {
		t.Fatal(fresh.err)
	}
	return fresh.assets
}

// TestEmbeddedModuleIsCurrent checks that the module `go generate ./page`
// left for the binary to embed is the one the current source builds: the
// build is reproducible, so any difference means a stale module.
func TestEmbeddedModuleIsCurrent(t *testing.T) {
	emb, ok := Embedded()
	if !ok {
		t.Skip("no module in page/assets to check (go generate ./page makes one); retrystorm page builds one on the fly")
	}
	a := freshAssets(t)
	if !bytes.Equal(emb.Module, a.Module) {
		t.Errorf("page/assets/%s (%d bytes) is not what the current source builds (%d bytes): run go generate ./page", ModuleFile, len(emb.Module), len(a.Module))
	}
	if !bytes.Equal(emb.WasmExec, a.WasmExec) {
		t.Errorf("page/assets/%s is not the go toolchain's: run go generate ./page", WasmExecFile)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module twice")
	}
	a := freshAssets(t)
	b, err := BuildAssets(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Module, b.Module) {
		t.Fatal("two builds of the same source gave different modules: the embedded module could never be checked")
	}
}

func TestRender(t *testing.T) {
	a := Assets{Module: []byte("not really a module"), WasmExec: []byte("// wasm_exec.js\n")}
	doc, err := Render(a)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	for _, want := range []string{
		base64.StdEncoding.EncodeToString(a.Module),
		"// wasm_exec.js",
		`id="panel-data"`,
		`"name":"storm"`,
		"DecompressionStream",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(s, "{{") {
		i := strings.Index(s, "{{")
		t.Errorf("a marker is left in the page: %q", s[i:min(len(s), i+20)])
	}
	// Nothing that a browser would fetch: no src or href to anything but
	// a fragment of the page itself, and no stylesheet import.
	for _, bad := range []string{"src=", "@import", "url(", `href="http`, "<link", "fetch("} {
		if strings.Contains(s, bad) {
			t.Errorf("the page holds %q: it must fetch nothing", bad)
		}
	}
}

func TestRenderRefusesAnEndTag(t *testing.T) {
	_, err := Render(Assets{Module: []byte{1}, WasmExec: []byte("x = '</script>';")})
	if err == nil {
		t.Fatal("a script holding </script> was inlined")
	}
}

func TestRenderRefusesAnOversizedPage(t *testing.T) {
	_, err := Render(Assets{Module: make([]byte, MaxBytes), WasmExec: []byte("//")})
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("got %v, want the page refused for its size", err)
	}
}
