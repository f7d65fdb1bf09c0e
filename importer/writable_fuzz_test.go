package importer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"unicode/utf8"
)

// FuzzDiffAndFix: for any two files, Diff is empty exactly when they are
// equal, and the SARIF fix of the change, applied by its regions, gives
// the second file.
func FuzzDiffAndFix(f *testing.F) {
	f.Add([]byte("a: 1\nb: 2\n"), []byte("a: 1\nb: 3\nc: 4\n"))
	f.Add([]byte("x\r\ny"), []byte("x\r\nz\n"))
	f.Add([]byte(""), []byte("new\n"))
	f.Add([]byte("é: 🚀\n"), []byte("é: 🚀🚀\n"))
	f.Fuzz(func(t *testing.T, before, after []byte) {
		if len(before) > 4<<10 || len(after) > 4<<10 {
			return
		}
		d := Diff("f", before, after)
		if (d == "") != bytes.Equal(before, after) {
			t.Fatalf("Diff of %q and %q is %q", before, after, d)
		}
		if bytes.Equal(before, after) {
			return
		}
		fix, err := SARIFFixOf("", []Edited{{Name: "f", Before: before, After: after}})
		if err != nil {
			if utf8.Valid(before) && utf8.Valid(after) {
				t.Fatal(err)
			}
			return // not text: refused
		}
		data, err := json.Marshal(fix)
		if err != nil {
			t.Fatal(err)
		}
		var back SARIFFix
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		type rep struct {
			start, end int
			text       string
		}
		var reps []rep
		for _, r := range back.ArtifactChanges[0].Replacements {
			reg := r.DeletedRegion
			if reg.StartLine < 1 || reg.StartColumn < 1 || reg.EndLine < reg.StartLine {
				t.Fatalf("region %+v", reg)
			}
			text := ""
			if r.InsertedContent != nil {
				text = r.InsertedContent.Text
			}
			s, e := sarifOffsetOf(before, reg.StartLine, reg.StartColumn), sarifOffsetOf(before, reg.EndLine, reg.EndColumn)
			if s < 0 || e < s {
				t.Fatalf("region %+v is not in %q", reg, before)
			}
			reps = append(reps, rep{s, e, text})
		}
		sort.Slice(reps, func(a, b int) bool { return reps[a].start > reps[b].start })
		got := slices.Clone(before)
		for _, r := range reps {
			got = slices.Concat(got[:r.start], []byte(r.text), got[r.end:])
		}
		if !bytes.Equal(got, after) {
			t.Fatalf("the fix gives %q, want %q", got, after)
		}
	})
}

// sarifOffsetOf is the byte offset of a line and a column in UTF-16 code
// units, or -1 when the position is not in b.
func sarifOffsetOf(b []byte, line, col int) int {
	for i := 0; i < len(b)+1; i++ {
		if i < len(b) && !utf8.RuneStart(b[i]) {
			continue
		}
		if l, c := sarifPosition(b, i); l == line && c == col {
			return i
		}
	}
	return -1
}

// FuzzWritable: whatever a file the importer reads, writing its format's
// space never panics, and every candidate it returns imports back as its
// fleet.
func FuzzWritable(f *testing.F) {
	for _, file := range []string{"envoy/route.yaml", "istio/reviews.yaml", "istio/destination-rule-reviews.yaml", "linkerd/books.yaml", "grpc/capitalised.json", "aws/env", "nginx/nginx.conf", "haproxy/haproxy.cfg"} {
		d, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4<<10 {
			return
		}
		srcs := []Source{{Name: "fuzz", Data: data}}
		fl, err := Import(srcs, Options{})
		if err != nil {
			return
		}
		cands, err := Writable(srcs, fl[0], WritableOptions{Conditions: true})
		if err != nil {
			return // a shape the writer does not edit, said as an error
		}
		for _, c := range cands[1:] {
			got, err := importEdited(srcs, c.Edited, fl[0], Options{})
			if err != nil || fleetKey(got.Fleet) != fleetKey(c.Fleet.Fleet) {
				t.Fatalf("%q does not import back: %v", c.Name, err)
			}
		}
	})
}
