package importer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/scenario"
)

// WritableOptions says what Writable searches. The zero value searches
// the format's settings with the user's retry conditions kept, and reads
// the files as Import does by default.
type WritableOptions struct {
	// Conditions makes the retry conditions part of the space (advise
	// --conditions): Envoy's retry_on, Istio's retryOn, gRPC's
	// retryableStatusCodes. False keeps the user's.
	Conditions bool
	// Import is how the files were imported (the protocol, the Istio
	// release, the AWS SDK's attempt timeout): each candidate is read back
	// the same way.
	Import Options
}

// Candidate is one policy the user's format can write, written into the
// user's own files and read back by the importer: what advise simulates
// is what the product reads.
type Candidate struct {
	// Name says what the candidate changes, in the product's own words
	// ("num_retries 1, retry_budget 20%/min 3, per_try_timeout 500ms");
	// AsItIs for the user's files unchanged.
	Name string
	// Fleet is the fleet the importer reads from the edited files (its
	// Origin is the user's object, or the new file's).
	Fleet Fleet
	// Edited are the files changed, with their diffs; a file the user
	// must add (a VirtualService for a host that has none, a
	// DestinationRule) has a nil Before, and Notes say where it goes.
	// Empty for the user's own policy.
	Edited []Edited
	// Notes say what the edit's scope is beyond the route (a virtual
	// host's retry policy, a ServiceProfile's budget, a service config's
	// retryThrottling) and where a new file goes.
	Notes []string
}

// AsItIs is the Name of the candidate that changes nothing.
const AsItIs = "as your files say"

// maxCandidates bounds one format's space before duplicates are dropped:
// the grids below stay far under it.
const maxCandidates = 1_000

// Writable returns the policies the format of from can write for it, each
// as written in the user's files (srcs, from which from was imported) and
// read back: the settings of docs/check.md's advise section, each over a
// small grid that holds the user's own value, never one that removes a
// limit the user has. Candidates whose imported fleets are equal are kept
// once (the one with the fewest changes). The user's own policy is first.
// Every edited file has passed the product's parser (ValidateEdited) and
// reads back as the candidate's settings; an edit that does not is an
// error wrapping ErrNotAccepted or ErrReadBack, never a candidate.
func Writable(srcs []Source, from Fleet, o WritableOptions) ([]Candidate, error) {
	w := &writer{srcs: srcs, from: from, loc: parseOrigin(from.Origin), files: map[string]*yamlFile{}, opts: o}
	var sp space
	var err error
	switch from.Format {
	case Envoy:
		sp, err = envoySpace(w)
	case Istio:
		sp, err = istioSpace(w)
	case Linkerd:
		sp, err = linkerdSpace(w)
	case GRPC:
		sp, err = grpcSpace(w)
	case AWS:
		sp, err = awsSpace(w)
	default:
		err = fmt.Errorf("importer: cannot write a %s file", from.Format)
	}
	if err != nil {
		return nil, err
	}
	own, err := importEdited(srcs, nil, from, o.Import)
	if err != nil {
		return nil, err
	}
	out := []Candidate{{Name: AsItIs, Fleet: own}}
	seen := map[string]bool{fleetKey(own.Fleet): true}
	for _, pick := range sp.picks() {
		c, err := w.candidate(sp, pick)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k := fleetKey(c.Fleet.Fleet); !seen[k] && !removesLimit(from.Fleet, c.Fleet.Fleet) {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// fleetKey is what makes two fleets the same to simulate: all but the
// name.
func fleetKey(f scenario.Fleet) string {
	f.Name = ""
	return fmt.Sprintf("%#v", f)
}

// removesLimit reports whether c has lost a limit user has: a retry budget
// (or a retry circuit breaker) while it still retries, or outlier
// detection.
func removesLimit(user, c scenario.Fleet) bool {
	none := func(b scenario.Budget) bool { return b.Use == "" || b.Use == scenario.BudgetNone }
	od := func(o scenario.OutlierDetection) bool { return o.Use != "" && o.Use != scenario.OutlierNone }
	return (!none(user.Budget) && none(c.Budget) && c.Retry.MaxRetries != 0) || (od(user.OutlierDetection) && !od(c.OutlierDetection))
}

// errSkip says that a combination of settings is not a candidate (a
// backoff for a route that no longer retries): it would duplicate
// another, or the format cannot say it.
var errSkip = errors.New("not a candidate")

// option is one value of one setting: apply writes it into the files
// (nil: the files' own value) and returns its words.
type option struct {
	apply func(w *writer) (string, error)
}

// asIs is the option that keeps a setting as the files say it.
var asIs = option{}

// space is a format's settings, each a list of options whose first keeps
// the files' value; skip drops combinations not worth a candidate.
type space struct {
	dims   [][]option
	skip   func(pick []int) bool
	finish func(w *writer) error // writes the new documents, once the options are applied
}

// picks lists every combination of options, those that change fewer
// settings first, so that of two candidates that read the same the
// simpler edit is kept.
func (sp space) picks() [][]int {
	var out [][]int
	pick := make([]int, len(sp.dims))
	var walk func(d int)
	walk = func(d int) {
		if len(out) > maxCandidates {
			return
		}
		if d == len(sp.dims) {
			if changed(pick) > 0 && (sp.skip == nil || !sp.skip(pick)) {
				out = append(out, slices.Clone(pick))
			}
			return
		}
		for i := range sp.dims[d] {
			pick[d] = i
			walk(d + 1)
		}
	}
	walk(0)
	slices.SortStableFunc(out, func(a, b []int) int { return changed(a) - changed(b) })
	return out
}

func changed(pick []int) int {
	n := 0
	for _, p := range pick {
		if p > 0 {
			n++
		}
	}
	return n
}

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

// candidate writes the options pick names, then checks the edit with the
// product's parser and reads it back.
func (w *writer) candidate(sp space, pick []int) (Candidate, error) {
	w.sets, w.removes, w.repl, w.added, w.notes, w.checks, w.docs = nil, nil, nil, nil, nil, nil, map[string][]kv{}
	w.retries = w.from.Fleet.Retry.MaxRetries
	if h := w.from.Fleet.Hedge; w.retries == 0 && h.Delay > 0 {
		w.retries = max(h.Max, 1) // hedges are extra attempts too: a throttle bounds them
	}
	var names []string
	for d, i := range pick {
		opt := sp.dims[d][i]
		if opt.apply == nil {
			continue
		}
		name, err := opt.apply(w)
		if err != nil {
			return Candidate{}, err
		}
		if name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return Candidate{}, errSkip
	}
	if sp.finish != nil {
		if err := sp.finish(w); err != nil {
			return Candidate{}, err
		}
	}
	edited, err := w.flush()
	if err != nil {
		return Candidate{}, err
	}
	if len(edited) == 0 {
		return Candidate{}, errSkip // the files already say it
	}
	name := strings.Join(names, ", ")
	if err := ValidateEdited(w.from.Format, edited); err != nil {
		return Candidate{}, fmt.Errorf("importer: candidate %q: %w", name, err)
	}
	got, err := importEdited(w.srcs, edited, w.from, w.opts.Import)
	if err != nil {
		return Candidate{}, fmt.Errorf("importer: candidate %q: %w", name, err)
	}
	var diffs []string
	for _, c := range w.checks {
		if d := c(got.Fleet); d != "" {
			diffs = append(diffs, d)
		}
	}
	if len(diffs) > 0 {
		return Candidate{}, fmt.Errorf("importer: candidate %q: %w: %s", name, ErrReadBack, strings.Join(diffs, "; "))
	}
	return Candidate{Name: name, Fleet: got, Edited: edited, Notes: slices.Clone(w.notes)}, nil
}

// flush makes the pending edits and returns the files they change, then
// resets the files for the next candidate.
func (w *writer) flush() ([]Edited, error) {
	defer func() {
		for _, f := range w.files {
			f.edits = nil
		}
	}()
	for _, s := range w.sets {
		if err := s.f.set(s.m, s.kvs); err != nil {
			return nil, err
		}
	}
	for _, r := range w.removes {
		if err := r.f.remove(r.m, r.keys...); err != nil {
			return nil, err
		}
	}
	for _, r := range w.repl {
		if err := r.f.replaceValue(r.n, r.text); err != nil {
			return nil, err
		}
	}
	var out []Edited
	for _, name := range w.order {
		f := w.files[name]
		after, err := f.apply()
		if err != nil {
			return nil, err
		}
		if string(after) != string(f.src) {
			out = append(out, Edited{Name: name, Before: f.src, After: after, Diff: Diff(name, f.src, after)})
		}
	}
	return append(out, w.added...), nil
}

// nameDur writes a duration in a candidate's name: 500ms, 7.5s, 2m.
func nameDur(d time.Duration) string {
	if d < time.Second || d%time.Second == 0 {
		return fmtDur(d)
	}
	return protoDur(d)
}
