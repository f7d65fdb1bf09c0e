package page

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/retrystorm/retrystorm/page/live"
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

// TestEmbeddedModuleIsCurrent checks that the module committed in
// page/assets, which every build of retrystorm embeds, is the one the
// current source builds. The build is reproducible with one toolchain, so
// any difference means a stale module; another toolchain builds other
// bytes, so the test skips there, but not in CI, which must run the
// toolchain the module was built with.
func TestEmbeddedModuleIsCurrent(t *testing.T) {
	emb, ok := Embedded()
	if !ok {
		t.Fatalf("page/assets lacks the module, wasm_exec.js or %s: run go generate ./page and commit page/assets", ToolchainFile)
	}
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	if local := strings.TrimSpace(string(out)); local != emb.Toolchain {
		msg := fmt.Sprintf("the committed module was built by %s and the go command here is %s, which builds other bytes: it cannot be checked with this toolchain", emb.Toolchain, local)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; CI must check it: run CI with %s, or rebuild the module with %s (go generate ./page) and commit page/assets", msg, emb.Toolchain, local)
		}
		t.Skip(msg)
	}
	a := freshAssets(t)
	if !bytes.Equal(gunzip(t, emb.Module), gunzip(t, a.Module)) {
		t.Errorf("page/assets/%s is not what the current source builds: run go generate ./page and commit page/assets", ModuleFile)
	}
	if !bytes.Equal(emb.WasmExec, a.WasmExec) {
		t.Errorf("page/assets/%s is not the go toolchain's: run go generate ./page and commit page/assets", WasmExecFile)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestModuleFitsTheRepository: the committed module stays under 2 MiB, the
// most a file committed to this repository may weigh.
func TestModuleFitsTheRepository(t *testing.T) {
	emb, ok := Embedded()
	if !ok {
		t.Fatal("no embedded module")
	}
	if n := len(emb.Module); n > 2<<20 {
		t.Errorf("page/assets/%s is %.2f MiB, over the 2 MiB a committed file may weigh: make the module smaller", ModuleFile, float64(n)/(1<<20))
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

// views are the panels' default views, or with -short (every panel, the
// sweep included, is half a minute under the race detector) a stand-in.
func views(t *testing.T) []byte {
	t.Helper()
	if testing.Short() {
		return []byte(`[{"name":"storm","title":"a stand-in <\/svg>"}]`)
	}
	v, err := DefaultViews()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRender(t *testing.T) {
	a := Assets{Module: []byte("not really a module"), WasmExec: []byte("// wasm_exec.js\n")}
	doc, err := render(a, views(t))
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
	_, err := render(Assets{Module: []byte{1}, WasmExec: []byte("x = '</script>';")}, views(t))
	if err == nil {
		t.Fatal("a script holding </script> was inlined")
	}
}

func TestRenderRefusesAnOversizedPage(t *testing.T) {
	_, err := render(Assets{Module: make([]byte, MaxBytes), WasmExec: []byte("//")}, views(t))
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("got %v, want the page refused for its size", err)
	}
}

// TestDefaultViews: the page carries every panel computed on its defaults
// with the page's seed, as the workers compute it (the browser test checks
// that they agree), and the JSON cannot end its script element.
func TestDefaultViews(t *testing.T) {
	if testing.Short() {
		t.Skip("computes every panel, the sweep included: seconds, half a minute under the race detector")
	}
	data, err := DefaultViews()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("</")) || bytes.Contains(data, []byte("<!--")) {
		t.Error("the views' JSON holds </ or <!--, which could end its script element")
	}
	var got []live.View
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	panels, err := live.Panels()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(panels) {
		t.Fatalf("%d views for %d panels", len(got), len(panels))
	}
	seed := uint64(PageSeed)
	for i, p := range panels {
		if got[i].Name != p.Name || len(got[i].Claims) == 0 || len(got[i].Charts) == 0 {
			t.Errorf("view %d is %q with %d claims and %d charts, want the %s panel", i, got[i].Name, len(got[i].Claims), len(got[i].Charts), p.Name)
		}
		if p.Name != "fleets" {
			continue
		}
		// The very view a worker hands the page for the defaults.
		// Both through the same decoding, as the page reads them.
		ran, err := json.Marshal(live.Run(context.Background(), p.Name, live.Request{Seed: &seed}, nil))
		if err != nil {
			t.Fatal(err)
		}
		var fresh live.View
		if err := json.Unmarshal(ran, &fresh); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(fresh)
		if have, _ := json.Marshal(got[i]); !bytes.Equal(have, want) {
			t.Errorf("the page's fleets view differs from what live.Run computes for the defaults")
		}
	}
}

// TestScriptSafe: the escaped JSON holds neither sequence that could move
// the end of its script element, and still decodes to the same value.
func TestScriptSafe(t *testing.T) {
	for _, in := range []string{
		`"plain"`,
		`{"svg":"<svg><text>a</text></svg>"}`,
		`["<!-- <script>", "</script>", "<!--x-->"]`,
		`"<<//<!<!--"`,
	} {
		out := scriptSafe([]byte(in))
		if bytes.Contains(out, []byte("</")) || bytes.Contains(out, []byte("<!--")) {
			t.Errorf("scriptSafe(%s) = %s: still unsafe", in, out)
		}
		var want, got any
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("scriptSafe(%s) = %s: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("scriptSafe(%s) decodes to %v, want %v", in, got, want)
		}
	}
}
