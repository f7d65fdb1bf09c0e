package importer

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// remove deletes keys (matched in any spelling, as child matches them)
// and their values from mapping m, in the file's own text: the keys that
// stay keep their bytes, and a key that follows a removed one takes its
// place. Removing every key of m is refused: the caller replaces m whole.
func (f *yamlFile) remove(m *yaml.Node, keys ...string) error {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping where the edit goes", f.name)
	}
	pairs := len(m.Content) / 2
	gone := make([]bool, pairs)
	any := false
	for i := range pairs {
		for _, k := range keys {
			if fold(m.Content[2*i].Value) == fold(k) {
				gone[i], any = true, true
			}
		}
	}
	if !any {
		return nil
	}
	if !slices.Contains(gone, false) {
		return fmt.Errorf("%s:%d: the edit would remove every key of a mapping", f.name, m.Line)
	}
	flow := m.Style&yaml.FlowStyle != 0 || f.json
	for a := 0; a < pairs; a++ {
		if !gone[a] {
			continue
		}
		b := a
		for b+1 < pairs && gone[b+1] {
			b++
		}
		var start, end int
		var err error
		switch {
		case b+1 < pairs:
			// A key follows: remove up to it, and it takes the place of
			// the first removed one, on the same line and column.
			if start, err = f.keyStart(m.Content[2*a]); err == nil {
				end, err = f.keyStart(m.Content[2*(b+1)])
			}
		case flow:
			// The last keys of a flow mapping: from the end of the value
			// before them, so that its comma goes too.
			if start, err = f.valueEnd(m.Content[2*a-1]); err == nil {
				end, err = f.valueEnd(m.Content[2*b+1])
			}
		default:
			// The last keys of a block mapping: their lines.
			start = f.lines[m.Content[2*a].Line-1]
			end = len(f.src)
			if last := lastLine(m.Content[2*b+1]); last < len(f.lines) {
				end = f.lines[last]
			}
		}
		if err != nil {
			return err
		}
		f.edits = append(f.edits, textEdit{start, end, ""})
		a = b
	}
	return nil
}

// keyStart is the offset of a key's first character, its quote included.
func (f *yamlFile) keyStart(k *yaml.Node) (int, error) {
	at, err := f.offset(k)
	if err != nil {
		return 0, err
	}
	if k.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && at > 0 && (f.src[at-1] == '"' || f.src[at-1] == '\'') && (at >= len(f.src) || f.src[at] != f.src[at-1]) {
		at-- // yaml.v3 may place a quoted key after its quote
	}
	return at, nil
}

// valueEnd is the offset just past a value written inline: a scalar, or a
// flow mapping or sequence (its brackets matched outside quoted strings).
func (f *yamlFile) valueEnd(n *yaml.Node) (int, error) {
	n = deref(n)
	start, err := f.keyStart(n)
	if err != nil {
		return 0, err
	}
	if n.Kind == yaml.ScalarNode {
		return f.scalarEnd(n, start)
	}
	if start >= len(f.src) || (f.src[start] != '{' && f.src[start] != '[') {
		return 0, fmt.Errorf("%s:%d: only a value written inline can be removed from a flow mapping", f.name, n.Line)
	}
	depth := 0
	var quote byte
	for i := start; i < len(f.src); i++ {
		c := f.src[i]
		switch {
		case quote != 0:
			switch {
			case c == '\\' && quote == '"':
				i++
			case c == quote:
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%s:%d: an unclosed value", f.name, n.Line)
}

// indentOf is the indentation of an inserted block's first line.
func indentOf(text string) int {
	text = strings.TrimLeft(text, "\n")
	return len(text) - len(strings.TrimLeft(text, " "))
}
