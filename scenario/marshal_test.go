package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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
