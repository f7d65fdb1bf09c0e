package configcmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/outfile"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/verdict"
)

// editTarget is the user's config advise writes its recommendation into:
// the files read, the fleet imported from them, and what its format can
// write (importer.Writable), each candidate an edit of those files.
type editTarget struct {
	srcs []importer.Source
	from importer.Fleet
	// cands are the writable candidates, cands[0] the user's files as
	// they are; none when the format's settings are not searched (why
	// says so).
	cands []importer.Candidate
	why   string
	// byName finds a candidate by the name advise gave its fleet.
	byName map[string]int
}

// maxFleetName is the most bytes a scenario fleet's name takes.
const maxFleetName = 100

// search lists what the user's format can write around its policy.
func (e *editTarget) search(conditions bool, assume importer.Options, o IO) error {
	cands, err := importer.Writable(e.srcs, e.from, importer.WritableOptions{Conditions: conditions, Import: assume})
	switch {
	case errors.Is(err, importer.ErrNotAccepted), errors.Is(err, importer.ErrReadBack):
		// An edit the product would not read as written: a bug of ours,
		// never a recommendation.
		return fmt.Errorf("advise: %w", err)
	case err != nil:
		e.why = err.Error()
		fmt.Fprintf(o.Stderr, "advise: %s: its settings are not searched; the recommendation is written into it as well as the format says it\n", strings.TrimPrefix(err.Error(), "importer: "))
		return nil
	}
	e.cands, e.byName = cands, map[string]int{}
	return nil
}

// shorten cuts s to a fleet name's length, keeping its end (the number
// that makes it unique) and whole runes.
func shorten(s string) string {
	if len(s) <= maxFleetName {
		return s
	}
	const cut = "… "
	keep := maxFleetName - len(cut)
	head, tail := s[:keep/2], s[len(s)-keep/2:]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) {
		tail = tail[1:]
	}
	return head + cut + tail
}

// recommended is the writable candidate advise recommends, when one does
// better than the user's policy over the same cells and seeds; ok is false
// when none does (or nothing was searched).
func (e *editTarget) recommended(r *verdict.AdviseResult) (c verdict.AdviseCandidate, edit importer.Candidate, ok bool) {
	best, found := r.BestWritable()
	if !found || best.Name == r.Candidates[0].Name || !verdict.Better(best, r.Candidates[0]) {
		return best, importer.Candidate{}, false
	}
	i, ok := e.byName[best.Name]
	if !ok {
		return best, importer.Candidate{}, false
	}
	return best, e.cands[i], true
}

// standing says where a candidate stands, in one phrase.
func standing(c verdict.AdviseCandidate) string {
	return fmt.Sprintf("%s, %d realistic cells collapsed, %d findings, %s intents lost", c.Level, c.Collapsed, c.AtRisk, report.Int(c.IntentsLost))
}

// explain prints what advise recommends for the user's file: the edit
// that does better, printed on its own as a diff patch -p0 applies, or
// why no edit this format can write does better, and what would.
func (e *editTarget) explain(o IO, r *verdict.AdviseResult) error {
	yours := r.Candidates[0]
	over := fmt.Sprintf("%d cells (%d faults × %d loads) × %d seed%s", len(r.Faults)*len(r.Loads), len(r.Faults), len(r.Loads), len(r.Seeds), plural(len(r.Seeds)))
	name := formatName(e.from.Format)
	fmt.Fprintf(o.Stdout, "\nYour policy: %s, over %s.\n", standing(yours), over)
	if e.cands == nil {
		return e.legacy(o, r)
	}
	rec, edit, ok := e.recommended(r)
	if !ok {
		switch {
		case yours.Level == verdict.Safe:
			fmt.Fprintf(o.Stdout, "Nothing %s can write does better over the same %s (%d candidates): your policy stays as it is.\n", name, over, len(e.cands)-1)
		default:
			fmt.Fprintf(o.Stdout, "Nothing %s can write at this layer does better than your policy over the same %s: %d candidates of its own settings were tried (docs/check.md lists them).\n", name, over, len(e.cands)-1)
			e.elsewhere(o, r, yours)
		}
		return nil
	}
	fmt.Fprintf(o.Stdout, "\nRecommended, as %s writes it: %s\n  %s, against yours: %s, over the same %s.\n", name, edit.Name, standing(rec), standing(yours), over)
	if best := r.Best(); !best.Writable && verdict.Better(best, rec) {
		fmt.Fprintf(o.Stdout, "  A code change would do better still: %s (%s); it is written below as resil Go code.\n", best.Name, standing(best))
	}
	fmt.Fprintln(o.Stdout, "\nThe edit (only what the recommendation changes; apply it with patch -p0, or give --write DIR or --in-place):")
	fmt.Fprintln(o.Stdout)
	for _, ed := range edit.Edited {
		fmt.Fprint(o.Stdout, ed.Diff)
	}
	for _, n := range edit.Notes {
		fmt.Fprintf(o.Stdout, "# note: %s\n", n)
	}
	return nil
}

// elsewhere says, when nothing the format writes helps, what would: the
// best candidate of all when it is a code change, and the layers around.
func (e *editTarget) elsewhere(o IO, r *verdict.AdviseResult, yours verdict.AdviseCandidate) {
	if best := r.Best(); !best.Writable && verdict.Better(best, yours) {
		fmt.Fprintf(o.Stdout, "What would: %s (%s), which needs code where the calls are made (resil's budget and breaker in the client: written below as resil Go code).\n", best.Name, standing(best))
	} else {
		fmt.Fprintln(o.Stdout, "Nor does any policy advise tried in code: the retries are not what keeps this fault going.")
	}
	fmt.Fprintln(o.Stdout, "Beyond this layer: a budget or a breaker in the layer that calls this one (check --stack finds which layer multiplies), or an origin that sheds what it cannot serve in time (deadline propagation: docs/check.md).")
}

// legacy is the edit for a format whose settings are not searched: the
// best candidate it can express whole, written with importer.Edit.
func (e *editTarget) legacy(o IO, r *verdict.AdviseResult) error {
	f := e.from.Format
	var c verdict.AdviseCandidate
	found := false
	for _, i := range r.Ranking {
		if cand := r.Candidates[i]; importer.Expressible(cand.Fleet, f) {
			c, found = cand, true
			break
		}
	}
	if !found || c.Name == r.Candidates[0].Name {
		fmt.Fprintf(o.Stdout, "No policy %s can express does better than yours (%s).\n", formatName(f), e.why)
		return nil
	}
	edited, notes, err := importer.Edit(e.srcs, e.from, c.Fleet)
	if err != nil {
		return err
	}
	e.cands = []importer.Candidate{{Name: importer.AsItIs}, {Name: c.Name, Edited: edited, Notes: notes}}
	e.byName = map[string]int{c.Name: 1}
	fmt.Fprintf(o.Stdout, "\nYour file, edited for %s (%s):\n\n", c.Name, standing(c))
	for _, ed := range edited {
		fmt.Fprint(o.Stdout, ed.Diff)
	}
	for _, n := range notes {
		fmt.Fprintf(o.Stdout, "# note: %s\n", n)
	}
	return nil
}

// apply writes the recommended edit where the flags say: into a
// directory (--write), over the user's files (--in-place, refused for a
// file that changed since it was read), as SARIF fixes (--sarif). files
// are the command's inputs.
func (e *editTarget) apply(o IO, r *verdict.AdviseResult, a AdviseOptions, inputs []string) error {
	if a.Write == "" && !a.InPlace && a.SARIF == "" {
		return nil
	}
	rec, edit, ok := e.recommended(r)
	if !ok && len(e.cands) == 2 && e.why != "" { // the legacy edit
		edit, ok = e.cands[1], true
	}
	if !ok || len(edit.Edited) == 0 {
		fmt.Fprintln(o.Stderr, "advise: no edit does better than your files: nothing written")
		return nil
	}
	if a.SARIF != "" {
		if err := writeAdviseSARIF(a.SARIF, r, rec, edit, append(inputs, a.Inputs...)); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: the edit as a SARIF fix: %s\n", a.SARIF)
	}
	if a.Write != "" {
		if err := writeEdits(a.Write, edit.Edited, append(inputs, a.Inputs...)); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: %d edited file%s written into %s\n", len(edit.Edited), plural(len(edit.Edited)), a.Write)
	}
	if a.InPlace {
		if err := editInPlace(edit.Edited); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: %d file%s edited in place\n", len(edit.Edited), plural(len(edit.Edited)))
	}
	return nil
}

// writeEdits writes each edited file into dir under its own name. A file
// already there is replaced only when it holds this edit already (an
// earlier --write of it) or the original; dir is never an input's
// directory with the input's own name (that is --in-place's job).
func writeEdits(dir string, edited []importer.Edited, inputs []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usagef("--write %s: %v", dir, err)
	}
	names := map[string]bool{}
	for _, ed := range edited {
		base := filepath.Base(ed.Name)
		if names[base] {
			return usagef("--write %s: two edited files are called %s: give each its own directory, or use --in-place", dir, base)
		}
		names[base] = true
		path := filepath.Join(dir, base)
		k := outfile.Kind{Name: "this edit of " + ed.Name, Is: func(head []byte) bool {
			return bytes.HasPrefix(ed.After, head) || bytes.HasPrefix(ed.Before, head) && len(ed.Before) > 0
		}}
		if err := outfile.Write(path, k, ed.After, inputs); err != nil {
			return usagef("--write %v", err)
		}
	}
	return nil
}

// editInPlace writes each edited file over the user's own, after checking
// that it still holds what advise read (no one changed it meanwhile); a
// new file is written only where none is.
func editInPlace(edited []importer.Edited) error {
	for _, ed := range edited {
		now, err := os.ReadFile(ed.Name)
		switch {
		case ed.Before == nil && err == nil:
			return usagef("--in-place: %s exists: advise would add it as a new file; look at it, then write the edit with --write DIR", ed.Name)
		case ed.Before == nil:
		case err != nil:
			return usagef("--in-place: %v", err)
		case !bytes.Equal(now, ed.Before):
			return usagef("--in-place: %s changed since advise read it: nothing written; run advise again", ed.Name)
		}
	}
	for _, ed := range edited {
		k := outfile.Kind{Name: "the file advise read", Is: func([]byte) bool { return true }}
		if err := outfile.Write(ed.Name, k, ed.After, nil); err != nil {
			return usagef("--in-place %v", err)
		}
	}
	return nil
}

// writeAdviseSARIF writes the recommendation as one SARIF result per
// edited file, each with the edit as its fix: a code-scanning tool shows
// it beside the line it changes.
func writeAdviseSARIF(file string, r *verdict.AdviseResult, rec verdict.AdviseCandidate, edit importer.Candidate, inputs []string) error {
	yours := r.Candidates[0]
	desc := fmt.Sprintf("retrystorm advise: %s (%s; yours: %s)", edit.Name, standing(rec), standing(yours))
	return writeSARIFFixes(file, yours.Level, desc, edit.Edited, inputs)
}

// writeSARIFFixes writes edited as one SARIF result per file, each with
// the whole edit as its fix, at the level of the verdict it answers.
func writeSARIFFixes(file string, answers verdict.Level, desc string, edited []importer.Edited, inputs []string) error {
	level := map[verdict.Level]string{verdict.Unsafe: "error", verdict.AtRisk: "warning", verdict.Safe: "note"}[answers]
	fix, err := importer.SARIFFixOf(desc, edited)
	if err != nil {
		return err
	}
	type location struct {
		PhysicalLocation struct {
			ArtifactLocation importer.SARIFArtifactLocation `json:"artifactLocation"`
			Region           *importer.SARIFRegion          `json:"region,omitempty"`
		} `json:"physicalLocation"`
	}
	type result struct {
		RuleID    string                `json:"ruleId"`
		Level     string                `json:"level"`
		Message   importer.SARIFMessage `json:"message"`
		Locations []location            `json:"locations"`
		Fixes     []importer.SARIFFix   `json:"fixes"`
	}
	var results []result
	for _, ch := range fix.ArtifactChanges {
		res := result{RuleID: "retry-storm", Level: level, Message: importer.SARIFMessage{Text: desc}, Fixes: []importer.SARIFFix{fix}}
		var l location
		l.PhysicalLocation.ArtifactLocation = ch.ArtifactLocation
		if len(ch.Replacements) > 0 {
			reg := ch.Replacements[0].DeletedRegion
			l.PhysicalLocation.Region = &reg
		}
		res.Locations = []location{l}
		results = append(results, res)
	}
	doc := map[string]any{
		"$schema": "https://json.schemastore.org/sarif-2.1.0.json",
		"version": "2.1.0",
		"runs": []any{map[string]any{
			"tool": map[string]any{"driver": map[string]any{"name": "retrystorm", "informationUri": "https://github.com/retrystorm/retrystorm",
				"rules": []any{map[string]any{"id": "retry-storm", "shortDescription": map[string]string{"text": "a retry policy that turns a dip into a storm, and an edit that does better"},
					"helpUri": "https://github.com/retrystorm/retrystorm/blob/main/docs/check.md"}}}},
			"columnKind": importer.SARIFColumnKind,
			"results":    results,
		}},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if err := outfile.Write(file, outfile.SARIF, b.Bytes(), inputs); err != nil {
		return usagef("--sarif %v", err)
	}
	return nil
}
