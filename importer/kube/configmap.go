package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/importer"
)

// Embedded is a config found inside a Kubernetes ConfigMap: a source the
// importer reads, named "file#ConfigMap name/key", and where its first
// line is in the manifest, so that a setting's line in it maps back to
// the manifest's.
type Embedded struct {
	Src    importer.Source
	File   string
	Offset int // the manifest's line = offset + the line in the value
}

// ConfigMapConfigs returns the configs held in the data of the ConfigMaps
// of a manifest, found by content (importer.Detect: a gRPC service
// config, an Envoy bootstrap, an AWS config file), and whether the file
// holds a ConfigMap at all. Values that are no config are skipped; a
// manifest that does not parse is an error naming its file and line.
func ConfigMapConfigs(name string, data []byte) ([]Embedded, bool, error) {
	if !bytes.Contains(data, []byte("ConfigMap")) {
		return nil, false, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []Embedded
	found := false
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if field(root, "kind") == nil || field(root, "kind").Value != "ConfigMap" {
			continue
		}
		found = true
		cm := ""
		if n := field(field(root, "metadata"), "name"); n != nil {
			cm = n.Value
		}
		d := field(root, "data")
		if d == nil || d.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(d.Content); i += 2 {
			key, v := d.Content[i].Value, d.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				continue
			}
			src := importer.Source{Name: fmt.Sprintf("%s#ConfigMap %s/%s", name, cm, key), Data: []byte(v.Value)}
			if _, err := importer.Detect(src.Name, src.Data); err != nil {
				continue // not a config: a ConfigMap holds other data too
			}
			// A block scalar's text begins on the line after its "|";
			// any other on the value's own line.
			off := v.Line - 1
			if v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
				off = v.Line
			}
			out = append(out, Embedded{Src: src, File: name, Offset: off})
		}
	}
	return out, found, nil
}

// field is mapping m's value at key, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
