// Package page writes retrystorm's page: one self-contained HTML file in
// which the simulator and the experiments, compiled to WebAssembly, run in
// the browser. It works opened from disk or from any static host, with no
// network: the module, Go's wasm_exec.js, the script and the style are all
// inlined, and the page fetches nothing.
//
// The module is package page/wasm (over package page/live). `go generate
// ./page` builds it into assets/, which is committed and embedded in every
// build of retrystorm; a test fails while it is stale.
package page

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/retrystorm/retrystorm/page/live"
)

// The page's own files: the HTML shell with its markers, the style, the
// page's script and the workers' script.
var (
	//go:embed web/index.html
	shell string
	//go:embed web/page.css
	style string
	//go:embed web/page.js
	script string
	//go:embed web/worker.js
	workerScript string
)

// MaxBytes is the size the page must stay under.
const MaxBytes = 6 << 20

// Write renders the page with the module embedded in this binary.
func Write(w io.Writer) error {
	a, ok := Embedded()
	if !ok {
		return errors.New("page: this binary embeds no WebAssembly module: page/assets lacks it (go generate ./page writes it)")
	}
	doc, err := Render(a)
	if err != nil {
		return err
	}
	_, err = w.Write(doc)
	return err
}

// Render assembles the page around the assets.
func Render(a Assets) ([]byte, error) {
	panels, err := live.Panels()
	if err != nil {
		return nil, err
	}
	// json.Marshal escapes <, > and &, so the data cannot close its
	// script element.
	data, err := json.Marshal(panels)
	if err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	// The scripts are inlined as text: none may hold the end tag that
	// would close its element early.
	for name, text := range map[string]string{"wasm_exec.js": string(a.WasmExec), "page.js": script, "worker.js": workerScript, "page.css": style} {
		if strings.Contains(strings.ToLower(text), "</script") || strings.Contains(strings.ToLower(text), "</style") {
			return nil, fmt.Errorf("page: %s holds an end tag and cannot be inlined", name)
		}
	}
	parts := map[string]string{
		"{{style}}":     style,
		"{{panels}}":    string(data),
		"{{wasm_exec}}": string(a.WasmExec),
		"{{worker}}":    workerScript,
		"{{module}}":    base64.StdEncoding.EncodeToString(a.Module),
		"{{script}}":    script,
	}
	var oldnew []string
	for marker, text := range parts {
		if n := strings.Count(shell, marker); n != 1 {
			return nil, fmt.Errorf("page: the shell holds %s %d times, want once", marker, n)
		}
		oldnew = append(oldnew, marker, text)
	}
	var b bytes.Buffer
	b.Grow(len(shell) + len(a.Module)*4/3 + len(a.WasmExec) + len(script) + len(style) + len(data) + len(workerScript))
	// One pass: a marker inside an inlined text is left alone.
	if _, err := strings.NewReplacer(oldnew...).WriteString(&b, shell); err != nil {
		return nil, err
	}
	if b.Len() > MaxBytes {
		return nil, fmt.Errorf("page: the page is %d bytes, over the limit of %d", b.Len(), MaxBytes)
	}
	return b.Bytes(), nil
}
