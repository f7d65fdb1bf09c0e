package importer

import (
	"regexp"
	"strconv"
	"strings"
)

// Setting is one line of a fleet's provenance (Fleet.From) read back: the
// setting, and the file and line it was read from. A setting taken from
// a documented default or the base scenario has no file.
type Setting struct {
	Name string // "retry.max_retries", "budget.budget_ratio"...
	File string
	Line int // 0 when the line is not known (the file is)
}

// CoveredSettings are Settings for each object f covers (Fleet.Covers:
// the objects with the same settings, imported as one fleet): the same
// settings, read at that object's own place. A setting whose provenance
// is not under f's object (a cluster's budget, a default) is kept as f
// has it.
func CoveredSettings(srcs []Source, f Fleet) [][]Setting {
	own := objectOf(f.Origin)
	var out [][]Setting
	for _, c := range f.Covers {
		other := objectOf(c)
		g := Fleet{Origin: c}
		for _, l := range f.From {
			if before, after, ok := strings.Cut(l, "  <- "+own); ok && own != "" {
				l = before + "  <- " + other + after
			}
			g.From = append(g.From, l)
		}
		out = append(out, Settings(srcs, g))
	}
	return out
}

// objectOf is an Origin less what follows its path: "file: Kind name:
// path (host h)" is "file: Kind name: path".
func objectOf(origin string) string {
	if i := strings.Index(origin, " ("); i >= 0 {
		return origin[:i]
	}
	return origin
}

// lineSuffix is the "(line N)" the AWS importer writes after an INI key.
var lineSuffix = regexp.MustCompile(`\(line (\d+)\)`)

// Settings reads the provenance of f back into settings with their file
// and line: the lines a CI annotation (SARIF, a pull request comment)
// points at. srcs are the files f was imported from.
func Settings(srcs []Source, f Fleet) []Setting {
	var out []Setting
	for _, l := range f.From {
		name, rest, ok := strings.Cut(l, ": ")
		_, where, ok2 := strings.Cut(rest, "  <- ")
		if !ok || !ok2 {
			continue
		}
		for _, n := range strings.Split(name, " and ") {
			s := Setting{Name: strings.TrimSpace(n)}
			s.File, s.Line = Locate(srcs, where)
			out = append(out, s)
		}
	}
	return out
}

// Locate finds where a provenance names ("file: [Kind name: ]path ..."
// or "file: [profile] key (line N)"): the file, and the line of the value
// at path (or of its nearest enclosing value that is there). It returns
// no file when where names none of srcs (a default, the base scenario).
func Locate(srcs []Source, where string) (string, int) {
	var src *Source
	for i := range srcs {
		if strings.HasPrefix(where, srcs[i].Name+": ") && (src == nil || len(srcs[i].Name) > len(src.Name)) {
			src = &srcs[i]
		}
	}
	if src == nil {
		return "", 0
	}
	rest := strings.TrimPrefix(where, src.Name+": ")
	if m := lineSuffix.FindStringSubmatch(rest); m != nil {
		n, _ := strconv.Atoi(m[1])
		return src.Name, n
	}
	docs, err := documents(src.Name, src.Data)
	if err != nil || len(docs) == 0 {
		return src.Name, 0
	}
	doc := docs[0]
	// "VirtualService orders: spec.http[0]...": the object by kind and name.
	// (The name may hold dots, as a ServiceProfile's host; the kind is one
	// capitalised word.)
	if obj, path, ok := strings.Cut(rest, ": "); ok && isKindAndName(obj) {
		kind, name, _ := strings.Cut(obj, " ")
		for _, d := range docs {
			if str(d, "kind") == kind && str(get(d, "metadata"), "name") == name {
				doc = d
				break
			}
		}
		rest = path
	}
	// The path ends at the first space or comma: what follows explains.
	if i := strings.IndexAny(rest, " ,"); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	for n := len(parts); n > 0; n-- {
		if v := lookup(doc, strings.Join(parts[:n], ".")); v != nil {
			return src.Name, v.Line
		}
	}
	return src.Name, doc.Line
}

// isKindAndName reports whether s reads "Kind name", as the importers
// name a Kubernetes object in a provenance.
func isKindAndName(s string) bool {
	kind, name, ok := strings.Cut(s, " ")
	return ok && name != "" && !strings.Contains(name, " ") && kind != "" && kind[0] >= 'A' && kind[0] <= 'Z' && !strings.ContainsAny(kind, ".[")
}
