package scenario

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// Marshal writes s as a scenario file in the shape Parse reads: the top
// level and each fleet in block style, every other map on one line. Every
// key that applies to each chosen kind is written, defaults included, so
// the file shows all there is to change. For a scenario that passes
// Validate, Parse gives back a scenario equal to s.
func Marshal(s *Scenario) []byte {
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{scenarioObject(s).write()}}
	doc.Content[0].HeadComment = "retrystorm scenario: every field is described in docs/scenario.md"
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
