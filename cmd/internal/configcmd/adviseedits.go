package configcmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/importer/kube"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// fileEdits are the edits advise makes across the layers of its chains,
// file by file: a file changed for two layers takes both, the second made
// on the first's result and read back from it; one layer (its file and
// object) advised two ways by two chains is not written.
type fileEdits struct {
	assume importer.Options
	order  []string
	files  map[string]*fileEdit
	done   map[string]scenario.Fleet // origin → the policy written there
	// worst is the worst verdict of the chains as they are, and advised
	// their recommendations ("chain: placement"): what a SARIF fix answers.
	worst   verdict.Level
	advised []string
}

// fileEdit is one file: as read, and as the edits so far leave it.
type fileEdit struct {
	before, after []byte
}

// add edits layer f's file(s) to policy rec, on what earlier edits left,
// and returns this edit's diff (against that) and its notes.
func (e *fileEdits) add(f stackFile, rec scenario.Fleet) (string, []string, error) {
	if e.files == nil {
		e.files, e.done = map[string]*fileEdit{}, map[string]scenario.Fleet{}
	}
	if prev, ok := e.done[f.from.Origin]; ok {
		if prev.Retry.MaxRetries == rec.Retry.MaxRetries && prev.Budget.Equal(rec.Budget) && prev.Breaker == rec.Breaker {
			return "  (the same change as for a chain above)\n", nil, nil
		}
		return "", nil, fmt.Errorf("another chain above advises %s otherwise: left as it is; advise on that chain alone (--stack) to choose", f.from.Origin)
	}
	srcs := slices.Clone(f.srcs)
	edited := false
	for i, s := range srcs {
		if fe, ok := e.files[s.Name]; ok {
			srcs[i].Data, edited = fe.after, true
		}
	}
	from := f.from
	if edited {
		// Read the layer again from the files as edited so far: the edit
		// goes where its object now is.
		fl, err := importer.Import(srcs, e.assume)
		if err != nil {
			return "", nil, fmt.Errorf("%s, as edited for another layer: %w", f.layer.File, err)
		}
		i := slices.IndexFunc(fl, func(x importer.Fleet) bool {
			return x.Origin == f.from.Origin || slices.Contains(x.Covers, f.from.Origin)
		})
		if i < 0 {
			return "", nil, fmt.Errorf("%s is not found again in the files as edited for another layer", f.from.Origin)
		}
		from = fl[i]
		from.Origin = f.from.Origin
	}
	out, notes, err := importer.Edit(srcs, from, rec)
	if err != nil {
		return "", nil, err
	}
	if f.embedded {
		var diff string
		for _, ed := range out {
			diff += ed.Diff
		}
		return diff, notes, nil // printed, never written
	}
	var diff string
	for _, ed := range out {
		diff += ed.Diff
		fe, ok := e.files[ed.Name]
		if !ok {
			fe = &fileEdit{before: ed.Before}
			e.files[ed.Name] = fe
			e.order = append(e.order, ed.Name)
		}
		fe.after = ed.After
	}
	e.done[f.from.Origin] = rec
	return diff, notes, nil
}

// edited is every file changed, against the file as read: what --write and
// --in-place write.
func (e *fileEdits) edited() []importer.Edited {
	var out []importer.Edited
	for _, name := range e.order {
		fe := e.files[name]
		out = append(out, importer.Edited{Name: name, Before: fe.before, After: fe.after, Diff: importer.Diff(name, fe.before, fe.after)})
	}
	return out
}

// apply writes the edits as advise's --write DIR and --in-place say.
func (e *fileEdits) apply(o IO, a AdviseOptions, inputs []string) error {
	if a.Write == "" && !a.InPlace && a.SARIF == "" {
		return nil
	}
	edited := e.edited()
	if len(edited) == 0 {
		fmt.Fprintln(o.Stderr, "advise: no layer's file changes: nothing written")
		return nil
	}
	if a.SARIF != "" {
		desc := fmt.Sprintf("retrystorm advise: each layer's change for the recommended placement (%s)", strings.Join(e.advised, "; "))
		if err := writeSARIFFixes(a.SARIF, e.worst, desc, edited, inputs); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: the edits as SARIF fixes: %s\n", a.SARIF)
	}
	if a.Write != "" {
		if err := writeEdits(a.Write, edited, inputs); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: %d edited file%s written into %s\n", len(edited), plural(len(edited)), a.Write)
	}
	if a.InPlace {
		if err := editInPlace(edited); err != nil {
			return err
		}
		fmt.Fprintf(o.Stderr, "advise: %d file%s edited in place\n", len(edited), plural(len(edited)))
	}
	return nil
}

// readManifestChains finds the chains in the manifests under c.Manifests
// (package kube), each distinct one once, as layers advise can edit.
func readManifestChains(o IO, c CheckOptions) (*stack, [][]stackFile, error) {
	opts, sh, err := c.options(o)
	if err != nil {
		return nil, nil, err
	}
	b, err := o.reader().Base(c.Base)
	if err != nil {
		return nil, nil, err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	found, err := kube.Find(c.Manifests, kube.Options{Read: func(name string) ([]byte, error) { return o.read(name, maxConfigSize) }, Import: c.assume()})
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	fmt.Fprintf(o.Stderr, "Manifests under %s: %d files, %d workloads, %d services, %d retry configs; %d chains found.\n", c.Manifests, found.Files, found.Workloads, found.Services, found.Configs, len(found.Chains))
	for _, u := range found.Unmatched {
		fmt.Fprintf(o.Stderr, "  not matched: %s\n", u)
	}
	if len(found.Chains) == 0 {
		return nil, nil, usagef("advise --manifests %s: no call chain found (see above what was not matched)", c.Manifests)
	}
	seen := map[string]bool{}
	var chains [][]stackFile
	for _, ch := range found.Chains {
		layers := stackLayers(ch)
		if key := chainKey(layers); seen[key] {
			continue
		} else {
			seen[key] = true
		}
		var files []stackFile
		for i, l := range ch {
			sf := stackFile{layer: layers[i], srcs: l.Sources, embedded: l.Embedded,
				from: importer.Fleet{Fleet: l.Fleet, Format: l.Format, Origin: l.Origin, From: l.From}}
			files = append(files, sf)
		}
		chains = append(chains, files)
	}
	return &stack{base: b, opts: opts, shard: sh}, chains, nil
}

// manifestInputs are the files advise --manifests read, which --write
// never writes over.
func manifestInputs(chains [][]stackFile) []string {
	var out []string
	for _, ch := range chains {
		for _, f := range ch {
			for _, s := range f.srcs {
				if !f.embedded && !slices.Contains(out, s.Name) {
					out = append(out, s.Name)
				}
			}
			if !slices.Contains(out, f.layer.File) {
				out = append(out, f.layer.File)
			}
		}
	}
	return out
}
