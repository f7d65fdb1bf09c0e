package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/internal/boundedfile"
)

// maxFileSize bounds what Parse reads: a scenario is a page of YAML, and a
// bound keeps a pathological file from costing the parser much.
const maxFileSize = 1 << 20

// Load reads and parses the scenario file at path. See [Parse]. It takes a
// regular file of at most the size limit (1 MiB) only, and reads at most
// the limit and one byte more (internal/boundedfile): a file too large is
// refused without being read whole, and a directory, a named pipe or a
// device (/dev/zero) without being read at all.
func Load(path string) (*Scenario, error) {
	data, err := boundedfile.Read(path, maxFileSize)
	switch {
	case errors.Is(err, boundedfile.ErrDirectory):
		return nil, &Error{File: path, Msg: "is a directory: give a scenario file (.yaml)", Err: err}
	case err != nil:
		return nil, &Error{File: path, Msg: err.Error(), Err: err}
	}
	return Parse(path, data)
}

// Parse reads a scenario from the YAML in data; filename is only used in
// messages and for the default name. It is strict: an unknown key, a value
// of the wrong type or out of range, a duplicate key, a setting that does
// not apply to the chosen kind, or a second YAML document is an error. The
// error is always an [*Error] naming the line and the field, and on error
// the scenario is nil. Defaults are filled in (docs/scenario.md lists
// them) and the result passes [Scenario.Validate].
//
// A rate series (traffic.series) is read from its CSV file, relative to
// filename's directory.
func Parse(filename string, data []byte) (*Scenario, error) {
	return parse(filename, data, readSeriesFile)
}

// ParseContained is Parse for a scenario that came from elsewhere (a lab
// shard's JSON, a page's link): it reads no file, and refuses a scenario
// that names one (a rate series' CSV), with an error naming the field.
func ParseContained(filename string, data []byte) (*Scenario, error) {
	return parse(filename, data, nil)
}

// parse is Parse reading the files a scenario names with read: nil reads
// none, and refuses a scenario that names one.
func parse(filename string, data []byte, read func(path string) ([]byte, error)) (*Scenario, error) {
	d := &decoder{file: filename, pos: map[string]*yaml.Node{}, shown: map[string]string{}, read: read}
	root, err := d.document(data)
	if err != nil {
		return nil, err
	}
	s := new(Scenario)
	if err := scenarioObject(s).read(d, root, ""); err != nil {
		return nil, err
	}
	if _, named := d.pos["name"]; !named {
		s.Name = defaultName(filename)
	}
	if e := s.validate(d.shown); e != nil {
		e.File = filename
		d.place(e)
		return nil, e
	}
	return s, nil
}

// defaultName is the file's base name without its extension, or
// "scenario" when that would not make a valid name.
func defaultName(filename string) string {
	base := filepath.Base(filename)
	n := strings.TrimSuffix(base, filepath.Ext(base))
	c := new(checker)
	name(c, "name", n)
	if !c.ok() || n == "." || n == "/" {
		return "scenario"
	}
	return n
}

// decoder walks the YAML tree of one file.
type decoder struct {
	file string
	// pos holds the node behind every field path read, so that an error
	// found later on the struct (by Validate) can point at its line.
	pos map[string]*yaml.Node
	// shown holds the text of numbers too large for their field, by path:
	// they are read saturated, so that the range check refuses them and
	// says the range, and the message quotes them as written.
	shown map[string]string
	// read reads a file the scenario names (a rate series), by its path
	// as the scenario's directory makes it; nil reads none.
	read func(path string) ([]byte, error)
}

// document parses data and returns its one top-level node.
func (d *decoder) document(data []byte) (*yaml.Node, error) {
	if len(data) > maxFileSize {
		return nil, &Error{File: d.file, Msg: fmt.Sprintf("the file is too large (%d bytes; at most %d)", len(data), maxFileSize)}
	}
	// The YAML reader refuses these without saying where: find the
	// place first.
	if e := d.badBytes(data); e != nil {
		return nil, e
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := decodeNode(dec, &doc); {
	case err == io.EOF:
		return nil, d.empty()
	case err != nil:
		return nil, d.syntaxError(err, data)
	}
	var next yaml.Node
	switch err := decodeNode(dec, &next); {
	case err == io.EOF:
	case err != nil:
		return nil, d.syntaxError(err, data)
	default:
		at := &next
		if len(next.Content) > 0 {
			at = next.Content[0]
		}
		return nil, d.errorOn(at, "", "a second YAML document: a scenario file holds exactly one (remove the \"---\" separator)")
	}
	if len(doc.Content) == 0 {
		return nil, d.empty()
	}
	root := doc.Content[0]
	if r := resolve(root); r.Kind == yaml.ScalarNode && r.ShortTag() == tagNull {
		return nil, d.empty() // "---" alone, or "~"
	}
	d.pos[""] = root
	return root, nil
}

// decodeNode parses the next document. The YAML parser reports errors by
// panicking and recovering inside; should a malformed file ever get a panic
// past it, the caller still gets an error and not a crash.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

func (d *decoder) empty() error {
	return &Error{File: d.file, Msg: "the file is empty: a scenario needs at least duration, traffic, origin and fleets"}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the messages of the YAML parser proper, as opposed to
// its scanner. It numbers their lines from 0 (the scanner's from 1); the
// line is the problem's, or where the enclosing map or list starts.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError turns the parser's "yaml: line 3: ..." into an Error. The
// messages that carry no line get one where the file lets us find it.
func (d *decoder) syntaxError(err error, data []byte) error {
	e := &Error{File: d.file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: "), Err: err}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "invalid YAML: " + m[2]
		if slices.Contains(parserProblems, m[2]) {
			e.Line++
		}
	} else if m := unknownAnchor.FindStringSubmatch(err.Error()); m != nil {
		// The first use of the alias: "*name" not followed by more of a
		// name.
		re := regexp.MustCompile(`\*` + regexp.QuoteMeta(m[1]) + `(?:[\s,\]}]|$)`)
		if loc := re.FindIndex(data); loc != nil {
			e.Line, e.Column = lineCol(data, loc[0])
		}
	}
	return e
}

var unknownAnchor = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)

// badBytes finds what the YAML reader refuses without a line: a byte that
// is not UTF-8, and a control character other than tab, newline and
// carriage return (YAML 1.2, 5.1).
func (d *decoder) badBytes(data []byte) *Error {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		var msg string
		switch {
		case r == utf8.RuneError && size <= 1:
			msg = fmt.Sprintf("invalid YAML: invalid UTF-8 (byte 0x%02x): save the file as UTF-8", data[i])
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0xfffe || r == 0xffff:
			msg = fmt.Sprintf("invalid YAML: a control character (%U) is not allowed; write it as an escape in a double-quoted string if you mean it", r)
		}
		if msg != "" {
			e := &Error{File: d.file, Msg: msg}
			e.Line, e.Column = lineCol(data, i)
			return e
		}
		i += size
	}
	return nil
}

// lineCol returns the 1-based line and column (in characters) of byte
// offset off.
func lineCol(data []byte, off int) (line, col int) {
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return bytes.Count(data[:off], []byte{'\n'}) + 1, utf8.RuneCount(data[start:off]) + 1
}

// errorOn returns an Error at node n about the field at path.
func (d *decoder) errorOn(n *yaml.Node, path, format string, args ...any) *Error {
	return &Error{File: d.file, Line: n.Line, Column: n.Column, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// errorAt returns an Error about the field at path, placed at the nearest
// node read on that path (the field may be absent).
func (d *decoder) errorAt(path, format string, args ...any) *Error {
	e := &Error{File: d.file, Field: path, Msg: fmt.Sprintf(format, args...)}
	d.place(e)
	return e
}

// place sets e's line and column to those of the field, or of the nearest
// map that holds it when the field was not in the file (a default).
func (d *decoder) place(e *Error) {
	for p := e.Field; ; p = parent(p) {
		if n, ok := d.pos[p]; ok {
			e.Line, e.Column = n.Line, n.Column
			return
		}
		if p == "" {
			return
		}
	}
}

func (d *decoder) typeError(n *yaml.Node, path, want string) *Error {
	msg := fmt.Sprintf("must be %s, got %s", want, describe(n))
	if n.Kind == yaml.ScalarNode && n.ShortTag() == tagStr && want == "a number" {
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			msg += " (remove the quotes)"
		}
	}
	return d.errorOn(n, path, "%s", msg)
}

// resolve follows an alias (*name) to the node it stands for.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// scalar returns n's scalar, if its type is one of tags.
func (d *decoder) scalar(n *yaml.Node, path, want string, tags ...string) (*yaml.Node, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || !slices.Contains(tags, n.ShortTag()) {
		return nil, d.typeError(n, path, want)
	}
	return n, nil
}

// integer reads a whole number. One too large for an int (the YAML
// library types those beyond 64 bits as floats, or strings) is read as the
// nearest int, and its text kept, for the range check to refuse.
func (d *decoder) integer(n *yaml.Node, path string) (int, error) {
	if negative, _, ok := d.bigInteger(n); ok {
		d.shown[path] = resolve(n).Value
		if negative {
			return math.MinInt, nil
		}
		return math.MaxInt, nil
	}
	n, err := d.scalar(n, path, "a whole number", tagInt)
	if err != nil {
		return 0, err
	}
	var i int
	if n.Decode(&i) != nil { // an explicit !!int tag on something else
		return 0, d.typeError(n, path, "a whole number")
	}
	return i, nil
}

// bigInteger reports whether n is an unquoted whole number that does not
// fit an int64 (decimal, or 0x, 0o, 0b), whether it is negative, and
// whether it fits a uint64. strconv's range errors say so without
// math/big, which would weigh some 30 KB in the page's module.
func (d *decoder) bigInteger(n *yaml.Node) (negative, uint64ok, ok bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 || n.Tag == "!!str" && n.Style&yaml.TaggedStyle != 0 {
		return false, false, false
	}
	v := strings.ReplaceAll(n.Value, "_", "")
	if strings.HasPrefix(v, "+") {
		v = v[1:]
	}
	if _, err := strconv.ParseInt(v, 0, 64); !errors.Is(err, strconv.ErrRange) {
		return false, false, false
	}
	negative = strings.HasPrefix(v, "-")
	_, err := strconv.ParseUint(v, 0, 64)
	return negative, !negative && err == nil, true
}

// pair is one key of a map and its value.
type pair struct {
	key          string
	keyNode, val *yaml.Node
}

// pairs returns the keys of the map n in the file's order, refusing keys
// that are not plain words, merge keys and duplicates. A nil n (an absent
// map) has no pairs.
func (d *decoder) pairs(n *yaml.Node, path string) ([]pair, error) {
	if n == nil {
		return nil, nil
	}
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, d.typeError(n, path, "a map (key: value)")
	}
	pairs := make([]pair, 0, len(n.Content)/2)
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, d.errorOn(k, path, "a key must be a plain word, got %s", describe(resolve(k)))
		}
		if k.ShortTag() == "!!merge" {
			return nil, d.errorOn(k, path, "merge keys (<<) are not supported: write the keys out (an alias such as *name may still stand for a whole value)")
		}
		if at, dup := first[k.Value]; dup {
			return nil, d.errorOn(k, join(path, k.Value), "duplicate key %q (first at line %d)", k.Value, at.Line)
		}
		first[k.Value] = k
		pairs = append(pairs, pair{key: k.Value, keyNode: k, val: v})
	}
	return pairs, nil
}
