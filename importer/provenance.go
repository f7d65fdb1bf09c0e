package importer

import (
	"fmt"
	"strings"
)

// Provenance says where one value of an imported fleet came from: the
// file, object, field path and line the config sets it at; or the
// documented default the product gives a field the config leaves out; or
// the product rule it was derived by. It is data: the comments import
// writes above a fleet (Fleet.Note, through String), the places check
// blames (Settings) and calibrate's comments are made from its fields, and
// nothing reads its text back.
type Provenance struct {
	// Settings are the fleet's keys the value is for, as
	// "retry.max_retries"; two when one field sets both (a gRPC method's
	// timeout is the timeout and the deadline).
	Settings []string
	// Value is the value as the fleet holds it, written for people:
	// "3", "25ms", "[timeout, refused]"; AsWritten for a scenario file's
	// own key.
	Value string
	// File is the file the value was read from; "" when no file sets it
	// (a default, or a value derived from the product's rules).
	File string
	// Object is the object of File that holds Path, where a file holds
	// several (Kubernetes objects); zero otherwise.
	Object Object
	// Path is where in File (or Object) the value is: a YAML or JSON
	// field's path ("spec.http[0].retries.attempts"), an INI key
	// ("[default] max_attempts"), a directive ("proxy_next_upstream_tries").
	// For a default, the field left unset.
	Path string
	// Line is Path's line in File when the importer read it there (the
	// line-oriented formats: nginx, HAProxy, the AWS files, annotations);
	// zero for a YAML field, whose line Locate finds from Path.
	Line int
	// Default reports a value the product documents for a field the
	// config leaves out; File is then "".
	Default bool
	// Rule is the product rule or documentation behind the value: where a
	// default is documented, why a derived value is what it is, or how a
	// value read from File follows from the field ("less the first
	// attempt").
	Rule string

	// How the note writes Rule after the place, and the line in it: the
	// importers' wording, kept as it was when it was text.
	ruleForm ruleForm
	lineForm lineForm
}

// Object names a Kubernetes object of a file by its kind and name.
type Object struct{ Kind, Name string }

// String is "Kind name", or "" for the zero Object.
func (o Object) String() string {
	if o.Kind == "" {
		return o.Name
	}
	return o.Kind + " " + o.Name
}

// AsWritten is the Value of a scenario file's own key: the fleet holds it
// as the file writes it.
const AsWritten = "as written"

// ruleForm is how a value's Rule follows the place it was read at.
type ruleForm uint8

const (
	afterComma     ruleForm = iota // "place, rule"
	inParens                       // "place (rule)"
	afterColon                     // "place: rule"
	afterSemicolon                 // "place; rule"
	afterSpace                     // "place rule"
)

// lineForm is how a place writes its Line.
type lineForm uint8

const (
	lineAfter     lineForm = iota // "path (line N)"
	lineBefore                    // "line N (path)": the AWS environment file's variables
	lineUnwritten                 // known, for Locate, and not written
)

// String is the line import writes above the fleet: "setting: value  <-
// where".
func (v Provenance) String() string {
	return strings.Join(v.Settings, " and ") + ": " + v.Value + "  <- " + v.Where()
}

// Where writes where the value came from: "FILE: " and At for a value
// read from a file; "default (PATH unset; RULE)" for a default; the rule
// for a derived value.
func (v Provenance) Where() string {
	switch {
	case v.File != "":
		return v.File + ": " + v.At()
	case v.Default && v.Object == (Object{}) && v.Path == "":
		return "default: " + v.Rule
	case v.Default:
		return "default (" + v.place() + " unset; " + v.Rule + ")"
	}
	return v.Rule
}

// At writes where in File a value read from it is, with the rule it
// follows: "[default] max_attempts (line 8), less the first attempt".
func (v Provenance) At() string {
	s := v.place()
	if v.Rule == "" {
		return s
	}
	switch v.ruleForm {
	case inParens:
		return s + " (" + v.Rule + ")"
	case afterColon:
		return s + ": " + v.Rule
	case afterSemicolon:
		return s + "; " + v.Rule
	case afterSpace:
		return s + " " + v.Rule
	}
	return s + ", " + v.Rule
}

// place writes Object, Path and Line.
func (v Provenance) place() string {
	s := v.Path
	if v.Object != (Object{}) {
		s = v.Object.String()
		if v.Path != "" {
			s += ": " + v.Path
		}
	}
	if v.Line > 0 {
		switch v.lineForm {
		case lineAfter:
			s += fmt.Sprintf(" (line %d)", v.Line)
		case lineBefore:
			s = fmt.Sprintf("line %d (%s)", v.Line, s)
		}
	}
	return s
}

// and adds a key the value is also for.
func (v *Provenance) and(setting string) *Provenance {
	v.Settings = append(v.Settings, setting)
	return v
}

// by gives a value read from a file the rule it follows, written in form
// after the place.
func (v *Provenance) by(form ruleForm, rule string) *Provenance {
	v.Rule, v.ruleForm = rule, form
	return v
}

// atLine gives the value's line, written as form says.
func (v *Provenance) atLine(line int, form lineForm) *Provenance {
	v.Line, v.lineForm = line, form
	return v
}

// prov collects a fleet's provenance as it is built.
type prov struct {
	file   string
	object Object // set by of: the object the paths given to set are in
	list   []Provenance
	lost   []string
	// root is the provenance a view made by in or of writes into; nil for
	// the provenance itself.
	root *prov
}

// in returns a view of p whose settings are read from file: a route's
// cluster, or its DestinationRule, in a file of its own (issue 36, row 9).
func (p *prov) in(file string) *prov { return &prov{file: file, root: p.base()} }

// of returns a view of p whose paths are in the object of p's file of
// that kind and name.
func (p *prov) of(kind, name string) *prov {
	return &prov{file: p.file, object: Object{kind, name}, root: p.base()}
}

// base is the provenance p writes into.
func (p *prov) base() *prov {
	if p.root != nil {
		return p.root
	}
	return p
}

// add records v, and returns it for the rule or the line to be added
// (until the next add).
func (p *prov) add(v Provenance) *Provenance {
	b := p.base()
	if b.list == nil {
		// A fleet has about a dozen: one allocation, not five.
		b.list = make([]Provenance, 0, 16)
	}
	b.list = append(b.list, v)
	return &b.list[len(b.list)-1]
}

// set notes that setting took value from path in p's file (and object).
func (p *prov) set(setting, value, path string) *Provenance {
	return p.add(Provenance{Settings: []string{setting}, Value: value, File: p.file, Object: p.object, Path: path})
}

// dflt notes that setting took the documented default value, because
// path (in p's object) was not set; source cites the documentation.
func (p *prov) dflt(setting, value, path, source string) *Provenance {
	return p.add(Provenance{Settings: []string{setting}, Value: value, Object: p.object, Path: path, Default: true, Rule: source})
}

// note records a derived setting with its reason.
func (p *prov) note(setting, value, why string) *Provenance {
	return p.add(Provenance{Settings: []string{setting}, Value: value, Rule: why})
}

// took records that setting took value as v says (a Provenance without
// its settings and value: a protocol's reason, made before the fleet).
func (p *prov) took(setting, value string, v Provenance) *Provenance {
	v.Settings, v.Value = []string{setting}, value
	return p.add(v)
}

func (p *prov) lose(format string, args ...any) {
	b := p.base()
	b.lost = append(b.lost, fmt.Sprintf(format, args...))
}
