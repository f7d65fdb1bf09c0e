package importer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The products read a key in more than one spelling, and an edit must
// change the key the file has, never add a second one beside it:
//
//   - Envoy and Istio read their YAML as protobuf JSON (protojson), which
//     takes a field's name as declared (per_try_timeout) or its JSON name
//     (perTryTimeout), and refuses a message that has both;
//   - grpc-go reads a service config with encoding/json, which matches
//     names without regard to case and keeps the last of two that match:
//     "maxAttempts" inserted after "MaxAttempts" would win in grpc-go and
//     lose in a reader that keeps the first (the project's grpcconfig
//     refuses both);
//   - Linkerd and the AWS SDKs have one spelling.
//
// So an edit finds a key by fold (the same letters, whatever the case and
// underscores: every spelling a product reads folds the same), and writes
// a key the file does not have in the style of its neighbours.

// keyStyle is how a file spells keys of several words.
type keyStyle int

const (
	styleUnknown keyStyle = iota
	styleSnake            // per_try_timeout
	styleCamel            // perTryTimeout
	stylePascal           // PerTryTimeout
)

// styleOf is the style of one key, when it shows one (a key of one word
// in lower case does not).
func styleOf(k string) keyStyle {
	r, _ := utf8.DecodeRuneInString(k)
	switch {
	case strings.Contains(k, "_"):
		return styleSnake
	case unicode.IsUpper(r):
		return stylePascal
	case strings.IndexFunc(k, unicode.IsUpper) > 0:
		return styleCamel
	}
	return styleUnknown
}

// mappingStyle is the style the keys of mapping m show: the first key of
// several words decides.
func mappingStyle(m *yaml.Node) keyStyle {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return styleUnknown
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if s := styleOf(m.Content[i].Value); s != styleUnknown {
			return s
		}
	}
	return styleUnknown
}

// fileStyle is the style most keys of the file's documents show, or
// styleUnknown when none shows one.
func (f *yamlFile) fileStyle() keyStyle {
	if f.style != nil {
		return *f.style
	}
	var votes [4]int
	var walkKeys func(n *yaml.Node, depth int)
	walkKeys = func(n *yaml.Node, depth int) {
		if n == nil || depth > maxDepth || n.Kind == yaml.AliasNode {
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				votes[styleOf(n.Content[i].Value)]++
			}
		}
		for _, c := range n.Content {
			walkKeys(c, depth+1)
		}
	}
	for _, d := range f.docs {
		walkKeys(d, 0)
	}
	s := styleUnknown
	for _, c := range []keyStyle{styleSnake, styleCamel, stylePascal} {
		if votes[c] > votes[s] || (s == styleUnknown && votes[c] > 0) {
			s = c
		}
	}
	f.style = &s
	return s
}

// words splits a key into its words: "per_try_timeout", "perTryTimeout"
// and "PerTryTimeout" are per, try, timeout.
func words(k string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for _, r := range k {
		switch {
		case r == '_':
			flush()
		case unicode.IsUpper(r) && len(cur) > 0:
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// spell writes key, given in any style, in style s (styleUnknown keeps
// it as given).
func spell(key string, s keyStyle) string {
	if s == styleUnknown || strings.HasPrefix(key, "@") {
		return key
	}
	w := words(key)
	if s == styleSnake {
		return strings.Join(w, "_")
	}
	for i := range w {
		if i > 0 || s == stylePascal {
			w[i] = strings.ToUpper(w[i][:1]) + w[i][1:]
		}
	}
	return strings.Join(w, "")
}

// respell writes the keys of kvs, to be inserted into mapping m, as m's
// keys are written (or, when m shows no style, as the file's are); a
// nested mapping's keys follow the same style.
func (f *yamlFile) respell(m *yaml.Node, kvs []kv) []kv {
	s := mappingStyle(m)
	if s == styleUnknown {
		s = f.fileStyle()
	}
	return respellAs(kvs, s)
}

func respellAs(kvs []kv, s keyStyle) []kv {
	out := make([]kv, len(kvs))
	for i, e := range kvs {
		e.Key = spell(e.Key, s)
		if e.Map != nil {
			e.Map = respellAs(e.Map, s)
		}
		out[i] = e
	}
	return out
}

// keyNode returns the key node of key in mapping m, matched by fold, or
// nil.
func keyNode(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if fold(m.Content[i].Value) == fold(key) {
			return m.Content[i]
		}
	}
	return nil
}
