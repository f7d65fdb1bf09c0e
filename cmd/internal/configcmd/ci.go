package configcmd

import (
	"bytes"

	"github.com/retrystorm/retrystorm/internal/outfile"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

// checkVerdicts are check's fleets as verdicts; u (the files imported)
// locates the settings to blame.
func checkVerdicts(r *verdict.CheckResult, in []verdict.CheckInput, u *userconfig.Files) []verdict.CIResult {
	return verdict.CheckFindings(r, func(i int) []verdict.Blame {
		f := r.Fleets[i]
		{
			file := f.Origin
			var at []verdict.SettingAt
			fl, ok := importer.Fleet{}, false
			if i < len(in) {
				if fl, ok = u.Imported(in[i]); ok {
					file = fl.File
					at = importerSettings(u, fl)
				}
			}
			blame := verdict.BlameAt(f.Name, file, at, f.Risks)
			if ok {
				// The objects with the same settings, imported as this
				// one fleet, are to blame as much: each at its own line.
				for k, set := range importer.CoveredSettings(u.Sources, fl) {
					var at []verdict.SettingAt
					for _, s := range set {
						at = append(at, verdict.SettingAt{Name: s.Name, File: s.File, Line: s.Line})
					}
					blame = append(blame, verdict.BlameAt(fl.Covers[k], file, at, f.Risks)...)
				}
			}
			return blame
		}
	})
}

// gate compares the verdicts with the baseline, writes the CI outputs,
// and returns ErrUnsafe when a verdict fails. settings are the check's,
// which the baseline's must be.
func (c *CheckOptions) gate(o IO, vs []verdict.CIResult, settings verdict.Settings) error {
	var base *verdict.Baseline
	if c.Baseline != "" {
		data, err := o.read(c.Baseline, maxShardSize)
		if err != nil {
			return usagef("--baseline %v", err)
		}
		if base, err = verdict.ReadBaseline(c.Baseline, data); err != nil {
			return usagef("%v", err)
		}
		if d := base.Settings.Differs(settings); d != "" {
			return usagef("--baseline %s was made with other settings (%s): compare runs of the same settings, or make the baseline again with these", c.Baseline, d)
		}
	}
	fails := verdict.Gate(vs, c.failOn(), base, o.Stderr)
	if c.SARIF != "" {
		if err := c.writeFile(c.SARIF, outfile.SARIF, func(b *bytes.Buffer) error { return verdict.WriteSARIF(b, vs) }); err != nil {
			return err
		}
	}
	if c.JUnit != "" {
		if err := c.writeFile(c.JUnit, outfile.JUnit, func(b *bytes.Buffer) error { return verdict.WriteJUnit(b, vs) }); err != nil {
			return err
		}
	}
	if fails > 0 {
		return ErrUnsafe
	}
	return nil
}

// writeFile writes a CI output of kind k: never over one of the check's
// inputs or a file of another kind, never through a link (outfile).
func (c *CheckOptions) writeFile(name string, k outfile.Kind, write func(*bytes.Buffer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if err := outfile.Write(name, k, b.Bytes(), c.Inputs); err != nil {
		return usagef("%v", err)
	}
	return nil
}
