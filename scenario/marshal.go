package scenario

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/internal/safetext"
)

// Marshal writes s as a scenario file in the shape Parse reads: the top
// level and each fleet in block style, every other map on one line. Every
// key that applies to each chosen kind is written, defaults included, so
// the file shows all there is to change. For a scenario that passes
// Validate, Parse gives back a scenario equal to s.
func Marshal(s *Scenario) []byte {
	return MarshalNotes(s, Notes{})
}

// Notes are comments MarshalNotes writes into a scenario file: the file's
// head, and one above each fleet (Fleets[i] above fleet i; empty for
// none). Lines are separated by newlines, without the "# ".
type Notes struct {
	Head   string
	Fleets []string
}

// MarshalNotes is Marshal with comments: what a tool that wrote the file
// wants its reader to know (the importers say there where each setting
// came from).
//
// Its memory is about one fleet's, whatever the number of fleets: the
// YAML encoder keeps every event of a document until the document ends
// (about 100 KB a fleet), so the top level is encoded without the fleets,
// and each fleet as a document of its own, whose lines are those the
// fleet has in the whole file (fleets is the last key).
func MarshalNotes(s *Scenario, n Notes) []byte {
	top := *s
	top.Fleets = nil
	root := scenarioObject(&top).write()
	root.HeadComment = "retrystorm scenario: every field is described in docs/scenario.md"
	if n.Head != "" {
		root.HeadComment += "\n\n" + comment(n.Head)
	}
	var buf bytes.Buffer
	encode(&buf, root)
	for i := range s.Fleets {
		f := fleetObject(&s.Fleets[i]).write()
		if i < len(n.Fleets) && n.Fleets[i] != "" {
			f.HeadComment = comment(n.Fleets[i])
		}
		one := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{plain("fleets"), {Kind: yaml.SequenceNode, Content: []*yaml.Node{f}}}}
		at := buf.Len()
		encode(&buf, one)
		if i > 0 {
			// Keep "fleets:" once: drop the line from every later fleet's
			// document.
			b := buf.Bytes()
			k := bytes.IndexByte(b[at:], '\n') + 1
			buf.Truncate(at + copy(b[at:], b[at+k:]))
		}
	}
	return buf.Bytes()
}

// comment makes a note safe to write as comments: the encoder refuses
// (by panicking) a comment that is not valid UTF-8, and Parse a file with
// a control character even in a comment, and a note quotes names from
// elsewhere (a file's, a profile's), which may hold anything. Each line's
// unprintable characters are written as Go escapes.
func comment(s string) string {
	if safetext.Printable(strings.ReplaceAll(s, "\n", "")) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = safetext.Escape(l)
	}
	return strings.Join(lines, "\n")
}

// encode appends n, a map, to buf as one YAML document.
func encode(buf *bytes.Buffer, n *yaml.Node) {
	enc := yaml.NewEncoder(buf)
	enc.SetIndent(2)
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}
	if err := enc.Encode(doc); err != nil {
		// The tree holds only plain scalars and valid UTF-8 strings, which
		// the encoder always takes.
		panic("scenario: Marshal: " + err.Error())
	}
	if err := enc.Close(); err != nil {
		panic("scenario: Marshal: " + err.Error())
	}
}
