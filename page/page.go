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
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

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
	//go:embed web/editor.js
	editorScript string
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

// Render assembles the page around the assets, with every panel computed
// on its defaults (see DefaultViews).
func Render(a Assets) ([]byte, error) {
	views, err := DefaultViews()
	if err != nil {
		return nil, err
	}
	return render(a, views)
}

// PageSeed is the seed the page starts with, and computes its panels
// with until the user changes it (web/index.html and web/page.js say 1
// too).
const PageSeed = 1

// DefaultViews returns every panel computed with its default knobs and
// PageSeed, in the page's order, as the JSON the page reads: exactly what
// the page's workers compute for the same request, computed here, once,
// natively. The page shows them as soon as its script runs, instead of
// after seconds of WebAssembly, then computes them again in the browser
// and reports any difference as an error (which the browser test fails
// on). The JSON is safe inside a script element (see scriptSafe).
var DefaultViews = sync.OnceValues(func() ([]byte, error) {
	panels, err := live.Panels()
	if err != nil {
		return nil, err
	}
	views := make([]live.View, len(panels))
	seed := uint64(PageSeed)
	var wg sync.WaitGroup
	for i, p := range panels {
		wg.Go(func() { views[i] = live.Run(context.Background(), p.Name, live.Request{Seed: &seed}, nil) })
	}
	wg.Wait()
	for _, v := range views {
		if v.Error != "" {
			return nil, fmt.Errorf("page: the %s panel on its defaults: %s", v.Name, v.Error)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a third smaller; the one sequence that matters is escaped below
	if err := enc.Encode(views); err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	return scriptSafe(bytes.TrimSpace(b.Bytes())), nil
})

// scriptSafe escapes JSON for the inside of an HTML script element: "</"
// could end the element, and "<!--" would send the parser into a state in
// which a later "<script" changes where the element ends. Both can only
// occur inside JSON strings, where "\/" and "\u0021" mean what they
// replace.
func scriptSafe(js []byte) []byte {
	js = bytes.ReplaceAll(js, []byte("</"), []byte(`<\/`))
	return bytes.ReplaceAll(js, []byte("<!--"), []byte(`<\u0021--`))
}

// render assembles the page around the assets and the panels' views.
func render(a Assets, views []byte) ([]byte, error) {
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
	editor, err := editorData()
	if err != nil {
		return nil, err
	}
	// The scripts are inlined as text: none may hold the end tag that
	// would close its element early.
	for name, text := range map[string]string{"wasm_exec.js": string(a.WasmExec), "page.js": script, "editor.js": editorScript, "worker.js": workerScript, "page.css": style} {
		if strings.Contains(strings.ToLower(text), "</script") || strings.Contains(strings.ToLower(text), "</style") {
			return nil, fmt.Errorf("page: %s holds an end tag and cannot be inlined", name)
		}
	}
	parts := map[string]string{
		"{{style}}":     style,
		"{{panels}}":    string(data),
		"{{views}}":     string(views),
		"{{wasm_exec}}": string(a.WasmExec),
		"{{worker}}":    workerScript,
		"{{module}}":    base64.StdEncoding.EncodeToString(a.Module),
		// The editor first: page.js ends by booting the page, which
		// builds the editor, whose top-level constants must be set.
		"{{script}}": editorScript + "\n" + script,
		"{{editor}}": string(editor),
		// The lede counts the panels: a count written by hand said
		// "Eight" over nine of them.
		"{{experiments}}": upperFirst(countWord(len(panels))) + " experiments",
	}
	var oldnew []string
	for marker, text := range parts {
		if n := strings.Count(shell, marker); n != 1 {
			return nil, fmt.Errorf("page: the shell holds %s %d times, want once", marker, n)
		}
		oldnew = append(oldnew, marker, text)
	}
	var b bytes.Buffer
	b.Grow(len(shell) + len(a.Module)*4/3 + len(a.WasmExec) + len(script) + len(editorScript) + len(style) + len(data) + len(editor) + len(views) + len(workerScript))
	// One pass: a marker inside an inlined text is left alone.
	if _, err := strings.NewReplacer(oldnew...).WriteString(&b, shell); err != nil {
		return nil, err
	}
	if b.Len() > MaxBytes {
		return nil, fmt.Errorf("page: the page is %d bytes, over the limit of %d", b.Len(), MaxBytes)
	}
	return b.Bytes(), nil
}

// editorData is what the scenario editor (web/editor.js) needs: its
// examples and its bounds, as JSON safe in a script element.
func editorData() ([]byte, error) {
	b, err := json.Marshal(struct {
		MaxBytes int            `json:"maxBytes"` // a link's scenario, at most
		MaxFile  int            `json:"maxFile"`  // a file loaded, at most
		Examples []live.Example `json:"examples"`
	}{live.MaxYAML, live.MaxYAML, live.Examples()})
	if err != nil {
		return nil, fmt.Errorf("page: %w", err)
	}
	return b, nil
}

// countWord writes n as the page's prose does: in words up to twenty, in
// digits beyond.
func countWord(n int) string {
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
