package scenario

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// TestMarshalShape pins the shape of what Marshal writes: DESIGN.md's
// example, with every default written out.
func TestMarshalShape(t *testing.T) {
	want := `# retrystorm scenario: every field is described in docs/scenario.md
name: storm
seed: 1
duration: 2m
tick: 1s
traffic: {rate: 100, arrivals: constant, clients: 200, idempotent: 1, keys: 0}
origin: {model: queue, capacity: 120, workers: 12, queue_limit: 0, drop_expired: false, discipline: fifo, max_queue_time: 0s, error_rate: 0, broken: 0, replicas: 1, limit: {use: none}, shed: {deadline: false, service_time: 0s, reserve: 0s}}
triggers:
  - {kind: capacity, at: 30s, for: 10s, capacity: 40}
fleets:
  - name: naive
    timeout: 1s
    deadline: 0s
    retry: {max_retries: 3, idempotent_only: false, backoff: {use: exponential, base: 100ms, cap: 10s, multiplier: 2, jitter: none, factor: 0}}
    budget: {use: none}
    breaker: {use: none}
    throttle: {use: none}
    hedge: {delay: 0s, max: 0}
  - name: guarded
    timeout: 1s
    deadline: 0s
    retry: {max_retries: 3, idempotent_only: true, backoff: {use: exponential, base: 100ms, cap: 10s, multiplier: 2, jitter: full, factor: 0}}
    budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 10, max_tokens: 100, funded_by: success, retry_cost: 1, timeout_cost: 1}}
    breaker: {use: consecutive, settings: {threshold: 5, cooldown: 5s, max_cooldown: 0s, probes: 1, scope: all}}
    throttle: {use: none}
    hedge: {delay: 0s, max: 0}
`
	s := storm
	if got := string(Marshal(&s)); got != want {
		t.Errorf("Marshal(storm) =\n%s\nwant\n%s", got, want)
	}
}

// TestRoundTrip checks that Parse(Marshal(s)) gives s back for every file
// in testdata.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, s)
		})
	}
}

// TestMarshalQuotes checks that names that would read back as another
// type are quoted.
func TestMarshalQuotes(t *testing.T) {
	for _, name := range []string{"true", "1", "1.5", "null", "~", "a: b", "- x", "#x", "it's", `"q"`, "ünïcode", " padded "} {
		s := storm
		s.Name = name
		s.Fleets = []Fleet{storm.Fleets[0]}
		s.Fleets[0].Name = name
		back, err := Parse("q.yaml", Marshal(&s))
		if err != nil {
			t.Errorf("name %q: %v\n%s", name, err, Marshal(&s))
			continue
		}
		if back.Name != name || back.Fleets[0].Name != name {
			t.Errorf("name %q came back as %q and %q", name, back.Name, back.Fleets[0].Name)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, s := range []string{"0s", "1h", "2m", "90s", "1ms", "1500ms", "1us", "7ns", "25h", "-3s"} {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatDuration(d); got != s {
			t.Errorf("formatDuration(%s) = %q", s, got)
		}
	}
}

func readTestdata(t testing.TB, name string) []byte {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// marshalWhole is MarshalNotes as one document, as it was written before
// it wrote each fleet on its own: the reference for TestMarshalNotesInPieces.
func marshalWhole(t *testing.T, s *Scenario, n Notes) []byte {
	t.Helper()
	root := scenarioObject(s).write()
	root.HeadComment = "retrystorm scenario: every field is described in docs/scenario.md"
	if n.Head != "" {
		root.HeadComment += "\n\n" + n.Head
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "fleets" {
			for j, f := range root.Content[i+1].Content {
				if j < len(n.Fleets) && n.Fleets[j] != "" {
					f.HeadComment = n.Fleets[j]
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	return buf.Bytes()
}

// TestMarshalNotesInPieces: writing each fleet as a document of its own
// gives the bytes the whole document gives, with and without notes.
func TestMarshalNotesInPieces(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		s, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		notes := Notes{Head: "the head\n\nin two parts"}
		for i := range s.Fleets {
			notes.Fleets = append(notes.Fleets, fmt.Sprintf("fleet %d\n  from here", i))
		}
		notes.Fleets = notes.Fleets[:len(notes.Fleets)/2] // some fleets without
		for _, n := range []Notes{{}, notes} {
			if got, want := MarshalNotes(s, n), marshalWhole(t, s, n); !bytes.Equal(got, want) {
				t.Errorf("%s: in pieces:\n%s\nwhole:\n%s", file, got, want)
			}
		}
	}
}

// TestMarshalNotesMemory is issue 27's: writing many fleets with notes
// held the YAML encoder's every event of the whole document at once
// (1.4 GB allocated, 715 MB at the peak, to write 15 MB). Now the peak is
// about one fleet's events above the output: it is measured here by
// sampling the live heap while MarshalNotes runs.
func TestMarshalNotesMemory(t *testing.T) {
	s := storm
	s.Fleets = nil
	var n Notes
	for i := range 3000 {
		f := storm.Fleets[1]
		f.Name = fmt.Sprintf("route %d", i)
		s.Fleets = append(s.Fleets, f)
		n.Fleets = append(n.Fleets, strings.Repeat(fmt.Sprintf("setting %d: value  <- file.yaml: virtual_hosts[0].routes[%d]\n", i, i), 8))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		for {
			select {
			case <-done:
				peak <- top
				return
			case <-time.After(time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapAlloc-min(ms.HeapAlloc, base))
		}
	}()
	out := MarshalNotes(&s, n)
	close(done)
	top := <-peak
	t.Logf("wrote %d bytes; the heap grew by at most %d above what it held before", len(out), top)
	// The output, its buffer's growth, and the garbage a collection
	// cycle leaves: a few times the output. The whole document's events
	// were about 90 times it (283 MB for 3.2 MB).
	if limit := 8*uint64(len(out)) + 32<<20; top > limit {
		t.Errorf("the heap grew by %d bytes to write %d: more than %d", top, len(out), limit)
	}
}

// TestMarshalNotesOutsideText: notes quote names from elsewhere (a file's,
// a profile's), which may hold bytes that are not UTF-8 (the encoder
// panicked on them) or control characters (Parse refused the file).
func TestMarshalNotesOutsideText(t *testing.T) {
	s := storm
	for _, note := range []string{"file \xff.yaml", "profile a\x01b", "esc \x1b[2J here", "bidi \u202e and\ttab", "two\nlines \x00"} {
		out := MarshalNotes(&s, Notes{Head: note, Fleets: []string{note}})
		if _, err := Parse("notes.yaml", out); err != nil {
			t.Errorf("note %q: the file does not load: %v\n%s", note, err, out)
		}
	}
}

// TestMarshalNotesEscapes: notes quote the user's files, whose names (and
// keys) may hold any bytes. The YAML encoder panicked on a comment that is
// not UTF-8 (issue 27, item 7, `import` of a file named "bad\xff.yaml"); a
// control character must not reach whoever reads the file raw either.
func TestMarshalNotesEscapes(t *testing.T) {
	s := storm
	notes := Notes{Head: "imported from bad\xff.yaml", Fleets: []string{"naive <- bad\xff.yaml: x\n\x1b[2Jcleared", ""}}
	var out []byte
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("MarshalNotes panicked: %v", r)
			}
		}()
		out = MarshalNotes(&s, notes)
	}()
	text := string(out)
	for _, want := range []string{`# imported from bad\xff.yaml`, `# naive <- bad\xff.yaml: x`, `# \x1b[2Jcleared`} {
		if !strings.Contains(text, want) {
			t.Errorf("MarshalNotes does not write %q:\n%s", want, text)
		}
	}
	if !utf8.Valid(out) || strings.ContainsRune(text, 0x1b) {
		t.Errorf("MarshalNotes wrote invalid UTF-8 or a raw escape:\n%q", text)
	}
	if _, err := Parse("back.yaml", out); err != nil {
		t.Errorf("what MarshalNotes wrote does not load: %v", err)
	}
}
