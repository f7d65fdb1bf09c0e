//go:build js && wasm

// Command wasm is the simulator and the experiments compiled for the
// browser page (GOOS=js GOARCH=wasm). It exposes package live to the page's
// workers as a global object:
//
//	retrystorm.run(name, requestJSON, progress) → viewJSON
//	retrystorm.check(yaml, as) → checkJSON (the editor's: live.CheckYAML)
//
// and then waits for calls for ever. `go generate ./page` builds it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"syscall/js"

	"github.com/retrystorm/retrystorm/page/live"
)

func main() {
	// WebAssembly has one thread: each collection stops the panel, where a
	// native process marks beside it. Collecting at five times the live
	// heap rather than twice took every panel's first computation in
	// Chromium from 5.75 s to 5.45 s (medians of six on two cores)
	// (BENCHMARKS.md); the soft limit keeps a worker's memory, which
	// WebAssembly never gives back, near what it was (73 MB natively at
	// the default, 157 MB at 400 without a limit).
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(160 << 20)
	api := js.Global().Get("Object").New()
	api.Set("run", js.FuncOf(run))
	api.Set("check", js.FuncOf(check))
	js.Global().Set("retrystorm", api)
	// Returning would end the program and the functions with it.
	select {}
}

// run is retrystorm.run. It answers with JSON, a string, because a string
// crosses into JavaScript in one piece where a tree of js.Values would take
// a call per node.
func run(_ js.Value, args []js.Value) (result any) {
	if len(args) < 2 {
		return errorView("", "retrystorm.run(name, request[, progress]) takes at least two arguments")
	}
	name := args[0].String()
	defer func() {
		// A bug must show on the page and in the console, not end the
		// program under every panel.
		if r := recover(); r != nil {
			result = errorView(name, fmt.Sprintf("internal error: %v\n%s", r, debug.Stack()))
		}
	}()
	var req live.Request
	if err := json.Unmarshal([]byte(args[1].String()), &req); err != nil {
		return errorView(name, "bad request: "+err.Error())
	}
	var progress func(done, total int)
	if len(args) > 2 && args[2].Type() == js.TypeFunction {
		f := args[2]
		progress = func(done, total int) { f.Invoke(done, total) }
	}
	v := live.Run(context.Background(), name, req, progress)
	// Without HTML escaping: the SVG's every < would be six bytes
	// (\u003c) to write here and to read on the page, which parses the
	// JSON and never pastes it into HTML source.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return errorView(name, err.Error())
	}
	return b.String()
}

// check is retrystorm.check: the editor's scenario checked and its cost
// estimated, as JSON.
func check(_ js.Value, args []js.Value) (result any) {
	defer func() {
		if r := recover(); r != nil {
			b, _ := json.Marshal(live.Check{Error: fmt.Sprintf("internal error: %v", r)})
			result = string(b)
		}
	}()
	if len(args) < 2 {
		return `{"error":"retrystorm.check(yaml, as) takes two arguments"}`
	}
	b, err := json.Marshal(live.CheckYAML(args[0].String(), args[1].String()))
	if err != nil {
		return `{"error":"internal error: the check does not encode"}`
	}
	return string(b)
}

func errorView(name, msg string) string {
	b, _ := json.Marshal(live.View{Name: name, Error: msg})
	return string(b)
}
