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
func MarshalNotes(s *Scenario, n Notes) []byte {
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{scenarioObject(s).write()}}
	root := doc.Content[0]
	root.HeadComment = "retrystorm scenario: every field is described in docs/scenario.md"
	if n.Head != "" {
		root.HeadComment += "\n\n" + comment(n.Head)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "fleets" {
			continue
		}
		for j, f := range root.Content[i+1].Content {
			if j < len(n.Fleets) && n.Fleets[j] != "" {
				f.HeadComment = comment(n.Fleets[j])
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		// The tree holds only plain scalars and valid UTF-8 strings, which
		// the encoder always takes.
		panic("scenario: Marshal: " + err.Error())
	}
	if err := enc.Close(); err != nil {
		panic("scenario: Marshal: " + err.Error())
	}
	return buf.Bytes()
}

// comment makes a note safe to write as a YAML comment: each of its lines
// with every byte that is not UTF-8 and every control character escaped.
// The notes quote the user's files (their names, their keys), and the YAML
// encoder panics on a comment that is not UTF-8.
func comment(note string) string {
	lines := strings.Split(note, "\n")
	for i, l := range lines {
		lines[i] = safetext.Escape(l)
	}
	return strings.Join(lines, "\n")
}
