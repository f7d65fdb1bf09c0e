package importer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// Pick is the option the candidate takes for each setting of the
	// format's space, in a fixed order: 0 is the user's own. A search can
	// go setting by setting (the candidates that change one setting
	// first, then combinations of the best of each).
	Pick []int
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
	case NGINX:
		sp, err = ngxSpace(w)
	case HAProxy:
		sp, err = hapSpace(w)
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
	out := []Candidate{{Name: AsItIs, Fleet: own, Pick: make([]int, len(sp.dims))}}
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
	w.coversNote(got)
	return Candidate{Name: name, Fleet: got, Edited: edited, Notes: slices.Clone(w.notes), Pick: slices.Clone(pick)}, nil
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

// conditionsOptions are the retry conditions of list (with gRPC's where
// the service speaks it) other than have, each made an option by opt:
// only with Conditions.
func conditionsOptions(w *writer, list []string, grpc bool, have string, opt func(string) option) []option {
	out := []option{asIs}
	if !w.opts.Conditions {
		return out
	}
	if grpc {
		list = append(slices.Clip(list), "unavailable", "unavailable,resource-exhausted")
	}
	for _, c := range list {
		if c != have {
			out = append(out, opt(c))
		}
	}
	return out
}

// expectOutlier adds that the imported fleet ejects as Envoy does.
func expectOutlier(w *writer) {
	w.expect(func(g scenario.Fleet) string {
		return unless(g.OutlierDetection.Use == scenario.OutlierEnvoy, "no outlier detection")
	})
}

// countOptions are the counts of grid other than have, each made an
// option by opt, and the index of the count 0 (-1: none).
func countOptions(grid []int, have int, opt func(int) option) ([]option, int) {
	out, zero := []option{asIs}, -1
	for _, n := range grid {
		if n == have {
			continue
		}
		if n == 0 {
			zero = len(out)
		}
		out = append(out, opt(n))
	}
	return out, zero
}

// coversNote says what became of the objects from stood for (its Covers):
// an edit in a shared place (a virtual host's retry policy) changes them
// too; one in the object's own place leaves them as they were.
func (w *writer) coversNote(got Fleet) {
	var stayed, moved []string
	for _, c := range w.from.Covers {
		if slices.Contains(got.Covers, c) || got.Origin == c {
			moved = append(moved, c)
		} else {
			stayed = append(stayed, c)
		}
	}
	if len(moved) > 0 {
		w.note("scope: the edit changes %s with the same settings alike: %s", others(len(moved)), strings.Join(moved, "; "))
	}
	if len(stayed) > 0 {
		w.note("the edit is %s's alone: %s with the same settings left as they are (%s)", w.from.Origin, others(len(stayed)), strings.Join(stayed, "; "))
	}
}

func others(n int) string {
	if n == 1 {
		return "1 other object"
	}
	return fmt.Sprintf("%d other objects", n)
}
