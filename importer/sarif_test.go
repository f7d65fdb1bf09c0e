package importer

import (
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"testing"
	"unicode/utf16"
)

// sarifObject checks v against a SARIF 2.1.0 schema object by hand (no
// JSON schema validator is in go.mod, as in configcmd's TestSARIFIsValid):
// the required properties are there, and no other than the schema's.
func sarifObject(t *testing.T, v any, where string, required []string, allowed ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object: %v", where, v)
	}
	for _, r := range required {
		if _, ok := m[r]; !ok {
			t.Errorf("%s: lacks the required %q", where, r)
		}
	}
	for k := range m {
		if !slices.Contains(required, k) && !slices.Contains(allowed, k) {
			t.Errorf("%s: property %q is not in the schema's", where, k)
		}
	}
	return m
}

func sarifArray(t *testing.T, v any, where string, minItems int) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok || len(l) < minItems {
		t.Fatalf("%s: not an array of at least %d items: %v", where, minItems, v)
	}
	return l
}

// sarifInt is a schema integer of at least lo.
func sarifInt(t *testing.T, v any, where string, lo int) int {
	t.Helper()
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) || int(f) < lo {
		t.Fatalf("%s: not an integer of at least %d: %v", where, lo, v)
	}
	return int(f)
}

// sarifOffset turns a line and a column in UTF-16 code units back into a
// byte offset of b.
func sarifOffset(t *testing.T, b []byte, line, col int) int {
	t.Helper()
	off := 0
	for l := 1; l < line; l++ {
		i := slices.Index(b[off:], '\n')
		if i < 0 {
			t.Fatalf("line %d is past the file's last", line)
		}
		off += i + 1
	}
	if line > 1 && off == len(b) {
		t.Fatalf("line %d is past the file's last", line)
	}
	units := 0
	for _, r := range string(b[off:]) {
		if units == col-1 {
			return off
		}
		if r == '\n' {
			break
		}
		units += len(utf16.Encode([]rune{r}))
		off += len(string(r))
	}
	if units != col-1 {
		t.Fatalf("column %d is past the end of line %d", col, line)
	}
	return off
}

// TestSARIFFix: a fix carries each edited file as SARIF's artifactChanges
// with replacements (deletedRegion by line and column, insertedContent),
// valid by the schema's required properties, and applying its
// replacements to the file gives the edited bytes: edits of the examples,
// a new file, changes at either end of a file, CRLF and characters outside
// the Basic Multilingual Plane (two UTF-16 code units).
func TestSARIFFix(t *testing.T) {
	srcs := readSources(t, "envoy/route.yaml", "envoy/cluster.yaml")
	fl, err := Import(srcs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	edited, _, err := Edit(srcs, fl[0], advised(fl[0].Fleet, 1, fl[0].Fleet.Budget))
	if err != nil || len(edited) == 0 {
		t.Fatalf("%v, %d edited", err, len(edited))
	}
	cases := [][]Edited{edited,
		{{Name: "new dir/vs.yaml", After: []byte("kind: VirtualService\n")}},
		{{Name: "a.yaml", Before: []byte("a: 1\nb: 2\n"), After: []byte("a: 1\nb: 2\nc: 3\n")}},
		{{Name: "b.yaml", Before: []byte("a: 1\nb: 2\n"), After: []byte("a: 1\n")}},
		{{Name: "c.yaml", Before: []byte("a: 1\nb: 2\n"), After: []byte("z: 0\na: 1\nb: 2\n")}},
		{{Name: "no-newline.yaml", Before: []byte("a: 1\nb: 2"), After: []byte("a: 1\nb: 2\nc: 3\n")}},
		{{Name: "d.yaml", Before: []byte("a: 1\r\nb: 2\r\n"), After: []byte("a: 1\r\nb: 3\r\n")}},
		{{Name: "e.yaml", Before: []byte("name: \"🚀 api\"\nn: 1\n"), After: []byte("name: \"🚀 api\"\nn: 2\n")}},
		{{Name: "f.yaml", Before: []byte("x: 1\ny: 2\n"), After: []byte("x: 1\n")}},
	}
	for _, c := range cases {
		t.Run(c[0].Name, func(t *testing.T) {
			fix, err := SARIFFixOf("num_retries 1", c)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(fix)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			// fix: artifactChanges required, minItems 1.
			f := sarifObject(t, v, "fix", []string{"artifactChanges"}, "description", "properties")
			sarifObject(t, f["description"], "message", []string{"text"}, "id", "markdown", "arguments", "properties")
			for i, ac := range sarifArray(t, f["artifactChanges"], "artifactChanges", 1) {
				// artifactChange: artifactLocation and replacements (minItems 1).
				a := sarifObject(t, ac, "artifactChange", []string{"artifactLocation", "replacements"}, "properties")
				loc := sarifObject(t, a["artifactLocation"], "artifactLocation", nil, "uri", "uriBaseId", "index", "description", "properties")
				u, _ := loc["uri"].(string)
				name, err := url.PathUnescape(u)
				if err != nil || name != c[i].Name {
					t.Errorf("uri %q is not %q as a URI reference: %v", u, c[i].Name, err)
				}
				type rep struct {
					start, end int
					text       string
				}
				var reps []rep
				before := c[i].Before
				for _, rv := range sarifArray(t, a["replacements"], "replacements", 1) {
					r := sarifObject(t, rv, "replacement", []string{"deletedRegion"}, "insertedContent", "properties")
					reg := sarifObject(t, r["deletedRegion"], "region", nil, "startLine", "startColumn", "endLine", "endColumn",
						"charOffset", "charLength", "byteOffset", "byteLength", "snippet", "message", "sourceLanguage", "properties")
					s := sarifOffset(t, before, sarifInt(t, reg["startLine"], "startLine", 1), sarifInt(t, reg["startColumn"], "startColumn", 1))
					e := sarifOffset(t, before, sarifInt(t, reg["endLine"], "endLine", 1), sarifInt(t, reg["endColumn"], "endColumn", 1))
					text := ""
					if r["insertedContent"] != nil {
						ic := sarifObject(t, r["insertedContent"], "artifactContent", nil, "text", "binary", "rendered", "properties")
						text, _ = ic["text"].(string)
					} else if s == e {
						t.Error("an insertion point without insertedContent (SARIF §3.57.3 requires it)")
					}
					reps = append(reps, rep{s, e, text})
				}
				sort.Slice(reps, func(a, b int) bool { return reps[a].start > reps[b].start })
				got := slices.Clone(before)
				for _, r := range reps {
					got = slices.Concat(got[:r.start], []byte(r.text), got[r.end:])
				}
				if string(got) != string(c[i].After) {
					t.Errorf("%s: the replacements give\n%q\nwant\n%q\n%s", c[i].Name, got, c[i].After, data)
				}
			}
		})
	}
	if _, err := SARIFFixOf("nothing", []Edited{{Name: "x", Before: []byte("a\n"), After: []byte("a\n")}}); err == nil {
		t.Error("a fix of a file that does not change")
	}
}
