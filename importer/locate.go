package importer

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// Setting is one of a fleet's settings with the file and line it was read
// from: the line a CI annotation (SARIF, a pull request comment) points
// at. A setting taken from a documented default or derived from the
// product's rules has no file.
type Setting struct {
	Name string // "retry.max_retries", "budget.budget_ratio"...
	File string
	Line int // 0 when the line is not known (the file is)
}

// Settings are f's settings (one per key of each of f.From) at their file
// and line. srcs are the files f was imported from.
func Settings(srcs []Source, f Fleet) []Setting {
	return newLocator(srcs).settings(f)
}

func (l *locator) settings(f Fleet) []Setting {
	var out []Setting
	for _, v := range f.From {
		file, line := l.locate(v)
		for _, n := range v.Settings {
			out = append(out, Setting{Name: n, File: file, Line: line})
		}
	}
	return out
}

// CoveredSettings are Settings for each object f covers (Fleet.Covers:
// the objects with the same settings, imported as one fleet): the same
// settings, read at that object's own place. A setting that is not read
// under f's object (a cluster's budget, a default) is kept as f has it.
func CoveredSettings(srcs []Source, f Fleet) [][]Setting {
	l := newLocator(srcs)
	var out [][]Setting
	for k := range f.Covers {
		var other place
		if k < len(f.coversAt) {
			other = f.coversAt[k]
		}
		g := Fleet{From: make([]Provenance, len(f.From))}
		for i, v := range f.From {
			g.From[i] = f.at.move(v, other)
		}
		out = append(out, l.settings(g))
	}
	return out
}

// place is where a fleet's config object is: its file, the object there
// by kind and name (where a file holds several), and its path in that
// object ("spec.http[0]"). The zero place is none: the fleet's settings
// are not read under one object.
type place struct {
	file   string
	object Object
	path   string
}

// move returns v read under to's object where it was read under p's: a
// route's setting, at the same path under the other route.
func (p place) move(v Provenance, to place) Provenance {
	if p.file == "" || to.file == "" || v.File != p.file || v.Object != p.object {
		return v
	}
	rest, ok := strings.CutPrefix(v.Path, p.path)
	if !ok || (p.path != "" && rest != "" && rest[0] != '.' && rest[0] != '[') {
		return v
	}
	v.File, v.Object, v.Path = to.file, to.object, to.path+rest
	return v
}

// Locate finds where v was read: its file, when that is one of srcs, and
// the line of its value (the line the importer read it at, or the line of
// the value at its YAML path, or of its nearest enclosing value that is
// there). It returns no file for a value no file of srcs sets (a default,
// a derived value).
func Locate(srcs []Source, v Provenance) (string, int) { return newLocator(srcs).locate(v) }

// locator is Locate over one set of sources, each found by name and
// parsed once however many values it is asked for: a fleet that covers a
// thousand routes (a directory of manifests) has a few values in each.
type locator struct {
	srcs   []Source
	byName map[string]int
	docs   map[int][]*yaml.Node // parsed; nil where the file does not parse
}

func newLocator(srcs []Source) *locator { return &locator{srcs: srcs} }

// source is the index of the source called name, or -1.
func (l *locator) source(name string) int {
	if name == "" {
		return -1
	}
	if l.byName == nil {
		l.byName = make(map[string]int, len(l.srcs))
		for i := len(l.srcs) - 1; i >= 0; i-- {
			l.byName[l.srcs[i].Name] = i // the first of a name, as a scan finds it
		}
	}
	if i, ok := l.byName[name]; ok {
		return i
	}
	return -1
}

func (l *locator) locate(v Provenance) (string, int) {
	i := l.source(v.File)
	if i < 0 {
		return "", 0
	}
	src := l.srcs[i]
	if v.Line > 0 {
		return src.Name, v.Line
	}
	docs, ok := l.docs[i]
	if !ok {
		var err error
		if docs, err = documents(src.Name, src.Data); err != nil {
			docs = nil
		}
		if l.docs == nil {
			l.docs = map[int][]*yaml.Node{}
		}
		l.docs[i] = docs
	}
	if len(docs) == 0 {
		return src.Name, 0
	}
	doc := docs[0]
	if v.Object != (Object{}) {
		for _, d := range docs {
			if str(d, "kind") == v.Object.Kind && str(get(d, "metadata"), "name") == v.Object.Name {
				doc = d
				break
			}
		}
	}
	parts := strings.Split(v.Path, ".")
	for n := len(parts); n > 0; n-- {
		if at := lookup(doc, strings.Join(parts[:n], ".")); at != nil {
			return src.Name, at.Line
		}
	}
	return src.Name, doc.Line
}
