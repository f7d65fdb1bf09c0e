package importer

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/scenario"
)

// writer collects one candidate's edits: what each option writes at a
// mapping of a file (merged, so that two settings of one retry policy are
// one edit), keys to remove, values to replace whole, new files. The
// files are parsed once; their edits are reset for each candidate.
type writer struct {
	srcs  []Source
	from  Fleet
	loc   location
	opts  WritableOptions
	files map[string]*yamlFile
	order []string

	sets    []pendingSet
	removes []pendingRemove
	repl    []pendingReplace
	added   []Edited
	notes   []string
	checks  []func(scenario.Fleet) string
	retries int // the extra attempts the candidate writes (retries, hedges), for the settings that follow
	// docs are the mappings of new documents the candidate adds, by
	// what they are ("virtualservice"), written by the space's finish.
	docs map[string][]kv
}

type pendingSet struct {
	f   *yamlFile
	m   *yaml.Node
	kvs []kv
}

type pendingRemove struct {
	f    *yamlFile
	m    *yaml.Node
	keys []string
}

type pendingReplace struct {
	f    *yamlFile
	n    *yaml.Node
	text string
}

// open parses a user's file once.
func (w *writer) open(name string) (*yamlFile, error) {
	if f, ok := w.files[name]; ok {
		return f, nil
	}
	for _, s := range w.srcs {
		if s.Name == name {
			f, err := parseYAMLFile(s)
			if err != nil {
				return nil, err
			}
			w.files[name] = f
			w.order = append(w.order, name)
			return f, nil
		}
	}
	return nil, fmt.Errorf("importer: %s is not among the files given", name)
}

// set writes kvs into mapping m of f, merged with what other settings
// write there.
func (w *writer) set(f *yamlFile, m *yaml.Node, kvs ...kv) {
	for i := range w.sets {
		if w.sets[i].f == f && w.sets[i].m == m {
			w.sets[i].kvs = mergeKVs(w.sets[i].kvs, kvs)
			return
		}
	}
	w.sets = append(w.sets, pendingSet{f, m, mergeKVs(nil, kvs)})
}

func (w *writer) remove(f *yamlFile, m *yaml.Node, keys ...string) {
	w.removes = append(w.removes, pendingRemove{f, m, keys})
}

func (w *writer) replace(f *yamlFile, n *yaml.Node, text string) {
	w.repl = append(w.repl, pendingReplace{f, n, text})
}

// doc adds kvs to the new document called what.
func (w *writer) doc(what string, kvs ...kv) {
	w.docs[what] = mergeKVs(w.docs[what], kvs)
}

// expect adds what the imported fleet must read: a check that returns
// what differs, or "".
func (w *writer) expect(check func(scenario.Fleet) string) {
	w.checks = append(w.checks, check)
}

func (w *writer) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(w.notes, n) {
		w.notes = append(w.notes, n)
	}
}

// mergeKVs adds b to a: a key already there takes b's value, a mapping
// already there takes b's keys.
func mergeKVs(a, b []kv) []kv {
	out := slices.Clone(a)
	for _, e := range b {
		i := slices.IndexFunc(out, func(o kv) bool { return fold(o.Key) == fold(e.Key) })
		switch {
		case i < 0:
			if e.Map != nil {
				e.Map = mergeKVs(nil, e.Map)
			}
			out = append(out, e)
		case e.Map != nil && out[i].Map != nil:
			out[i].Map = mergeKVs(out[i].Map, e.Map)
		default:
			out[i] = e
		}
	}
	return out
}
