package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits on what one file may cost to read: configs are small, so these
// catch a wrong file (a log, a binary) before it costs anything.
const (
	maxFileBytes = 4 << 20
	maxNodes     = 200_000
	maxDepth     = 100
)

// documents splits a YAML (or JSON) file into its documents.
func documents(name string, data []byte) ([]*yaml.Node, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes: larger than the %d a config file may be", name, len(data), maxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(n.Content) == 0 {
			continue
		}
		root := n.Content[0]
		if count(root, 0) > maxNodes {
			return nil, fmt.Errorf("%s: more than %d values, or nested deeper than %d: not a config file", name, maxNodes, maxDepth)
		}
		if items := listItems(root); items != nil {
			docs = append(docs, items...) // kubectl get -o yaml: kind: List
			continue
		}
		docs = append(docs, root)
	}
	return docs, nil
}

// listItems returns the objects of a Kubernetes List (what kubectl get -o
// yaml writes for more than one object), or nil for any other document.
func listItems(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.MappingNode || str(n, "apiVersion") != "v1" || !strings.HasSuffix(str(n, "kind"), "List") {
		return nil
	}
	items := get(n, "items")
	if items == nil || items.Kind != yaml.SequenceNode {
		return nil
	}
	return append([]*yaml.Node{}, items.Content...)
}

// count counts the nodes under n, aliases expanded, and stops early past
// the limits (it returns more than maxNodes then).
func count(n *yaml.Node, depth int) int {
	if depth > maxDepth {
		return maxNodes + 1
	}
	if n.Kind == yaml.AliasNode {
		return count(n.Alias, depth+1)
	}
	c := 1
	for _, k := range n.Content {
		c += count(k, depth+1)
		if c > maxNodes {
			break
		}
	}
	return c
}

// get returns the value of key in the map n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

// getAnyCase is get with the key matched regardless of case, as Go's
// encoding/json matches a struct's fields (grpc-go's service configs).
func getAnyCase(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if strings.EqualFold(n.Content[i].Value, key) {
			return deref(n.Content[i+1])
		}
	}
	return nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// str returns the string value of the scalar at key, or "".
func str(n *yaml.Node, key string) string {
	v := get(n, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// jsonDoc is a YAML node written as JSON, one value per line, with the
// YAML line of each JSON line, so that an error protojson reports at a
// JSON line can name the YAML line.
type jsonDoc struct {
	buf   bytes.Buffer
	lines []int // lines[i] is the YAML line of JSON line i+1
	// anyType, if set, says whether a message type named in an "@type"
	// may be kept; the others are replaced by google.protobuf.Empty and
	// reported in dropped.
	anyType func(url string) bool
	dropped []string
	// goDurations rewrites strings in Go's duration syntax ("5m",
	// "100ms") to protobuf JSON's ("300s"), as Istio's loader accepts
	// them and protojson does not.
	goDurations bool
}

func (j *jsonDoc) newline(yamlLine int) {
	j.buf.WriteByte('\n')
	j.lines = append(j.lines, yamlLine)
}

// toJSON writes n as JSON.
func toJSON(n *yaml.Node, anyType func(string) bool, goDurations bool) (*jsonDoc, error) {
	j := &jsonDoc{anyType: anyType, goDurations: goDurations}
	j.lines = append(j.lines, n.Line)
	if err := j.write(n, ""); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *jsonDoc) write(n *yaml.Node, path string) error {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		if t := get(n, "@type"); t != nil && j.anyType != nil && !j.anyType(t.Value) {
			j.dropped = append(j.dropped, fmt.Sprintf("%s (%s)", path, t.Value))
			j.buf.WriteString(`{"@type": "type.googleapis.com/google.protobuf.Empty"}`)
			return nil
		}
		j.buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: %s: a key must be a string", k.Line, path)
			}
			if k.Value == "<<" {
				return fmt.Errorf("line %d: %s: YAML merge keys (<<) are not read here", k.Line, path)
			}
			if i > 0 {
				j.buf.WriteByte(',')
			}
			j.newline(k.Line)
			kb, _ := jsonString(k.Value)
			j.buf.Write(kb)
			j.buf.WriteString(": ")
			if err := j.write(v, joinPath(path, k.Value)); err != nil {
				return err
			}
		}
		j.buf.WriteByte('}')
	case yaml.SequenceNode:
		j.buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				j.buf.WriteByte(',')
			}
			j.newline(v.Line)
			if err := j.write(v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		j.buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			j.buf.WriteString("null")
		case "!!bool":
			b, err := strconv.ParseBool(strings.ToLower(n.Value))
			if err != nil {
				return fmt.Errorf("line %d: %s: %q is not a boolean", n.Line, path, n.Value)
			}
			j.buf.WriteString(strconv.FormatBool(b))
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if i, ierr := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); ierr == nil {
				j.buf.WriteString(strconv.FormatInt(i, 10))
				return nil
			}
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("line %d: %s: %q is not a finite number", n.Line, path, n.Value)
			}
			j.buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		default:
			v := n.Value
			if j.goDurations {
				if d, err := time.ParseDuration(v); err == nil && !protoSeconds.MatchString(v) {
					v = strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
				}
			}
			b, _ := jsonString(v)
			j.buf.Write(b)
		}
	default:
		return fmt.Errorf("line %d: %s: unexpected YAML node", n.Line, path)
	}
	return nil
}

func jsonString(s string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.Bytes(), nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// protoSeconds is protobuf JSON's duration syntax.
var protoSeconds = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?s$`)

var jsonLine = regexp.MustCompile(`\(line (\d+):\d+\)`)

// yamlError rewrites an error that names a JSON line ("(line 5:3)") to
// name the YAML line of file instead.
func (j *jsonDoc) yamlError(file string, err error) error {
	// protojson varies its messages' spacing on purpose (a normal or a
	// non-breaking space): normalise before reading them.
	msg := strings.ReplaceAll(err.Error(), "\u00a0", " ")
	line := 0
	if m := jsonLine.FindStringSubmatch(msg); m != nil {
		if l, _ := strconv.Atoi(m[1]); l >= 1 && l <= len(j.lines) {
			line = j.lines[l-1]
		}
		msg = jsonLine.ReplaceAllString(msg, "")
	}
	msg = strings.TrimSpace(msg)
	msg = strings.TrimPrefix(msg, "proto:")
	msg = strings.TrimLeft(msg, " :")
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", file, line, msg)
	}
	return fmt.Errorf("%s: %s", file, msg)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
