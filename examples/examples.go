// Package examples holds Stability Sim's eight examples
// (marcbrooker/stability-sim, src/examples/index.ts) as retrystorm
// scenario files: the same systems, loads and failures in retrystorm's
// words, for `retrystorm run examples/NAME.yaml` and the page's examples
// menu. README.md says what each shows, what the peer's engine shows for
// it, and where and why the two differ.
package examples

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Example is one example scenario file.
type Example struct {
	Name  string // the file's name without .yaml: the peer's example id
	Title string // the file's first comment line, up to its first comma
	YAML  []byte
}

// All returns the examples in the order of the peer's menu.
func All() []Example {
	var out []Example
	for _, name := range order {
		data, err := fs.ReadFile(files, name+".yaml")
		if err != nil {
			panic("examples: " + err.Error()) // embedded: a missing one is a build error
		}
		out = append(out, Example{Name: name, Title: title(data), YAML: data})
	}
	return out
}

// order is the peer's menu (src/examples/index.ts, EXAMPLES).
var order = []string{
	"metastable-retry", "gc-death-spiral", "connection-pool-exhaustion", "cache-stampede",
	"cache-flush", "timeout-cascade", "lb-sinkholing", "goodput-collapse",
}

// title is the first comment line of a file, up to its first comma.
func title(data []byte) string {
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimPrefix(line, "# ")
	t, _, _ := strings.Cut(line, ",")
	return t
}
