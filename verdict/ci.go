package verdict

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// CIResult is one checked fleet or chain as a CI sees it: a test case, and
// the settings to blame as annotations at their file and line.
type CIResult struct {
	Name   string
	Origin string
	Level  Level
	// Cells is how many cells count against it (FailingCells): a
	// baseline compares it.
	Cells int
	// Text is the verdict in words (check's verdict line).
	Text string
	// Margin is the fleet's margin in words, when searched.
	Margin string
	Blame  []Blame
	// Fails: at or past the level the gate fails on, and (with a
	// baseline) worse than it was.
	Fails bool
	// Was is the baseline's verdict: "" (no baseline, or not in it), or
	// "SAFE", "AT RISK (N cells)"...; BaselineState is SARIF's: "new",
	// "unchanged" or "updated" with a baseline, "" without.
	Was           string
	BaselineState string
}

// VerdictLine is check's verdict line for fleet i.
func VerdictLine(r *CheckResult, i int) string { return r.verdictLine(i) }

// marginText is fleet i's margin in words, or "" when not searched.
func (r *CheckResult) marginText(i int) string {
	if m := r.Fleets[i].Margin; m != nil {
		return m.text(r.RealLoad, r.RealDip)
	}
	return ""
}

// StackFindings is a checked stack as a CI sees it: one result, the
// chain, with every layer's settings to blame.
func StackFindings(r *StackResult) []CIResult {
	v := CIResult{Name: r.Check.Fleets[0].Name, Origin: r.Chain, Level: r.Level, Cells: r.Check.FailingCells(0), Text: VerdictLine(r.Check, 0), Margin: r.Check.marginText(0)}
	if r.Level != Safe {
		for _, l := range r.Layers {
			v.Blame = append(v.Blame, l.Blame...)
		}
	}
	return []CIResult{v}
}

// CheckFindings are check's fleets as a CI sees them; blame(i) gives
// the settings to blame of fleet i, located in the user's files, for a
// fleet that is not SAFE.
func CheckFindings(r *CheckResult, blame func(i int) []Blame) []CIResult {
	var out []CIResult
	for i, f := range r.Fleets {
		v := CIResult{Name: f.Name, Origin: f.Origin, Level: f.Verdict, Cells: r.FailingCells(i), Text: VerdictLine(r, i), Margin: r.marginText(i)}
		if v.Level != Safe {
			v.Blame = blame(i)
		}
		out = append(out, v)
	}
	return out
}

// Gate marks each result that fails: at failOn or worse, and, with a
// baseline (nil for none), worse than the baseline had it: a level above
// the baseline's, or the same level in more cells. It returns how many
// fail, and says on w each one a baseline forgives.
func Gate(vs []CIResult, failOn Level, base *Baseline, w io.Writer) int {
	fails := 0
	for i := range vs {
		v := &vs[i]
		v.Fails = v.Level >= failOn
		if base != nil {
			was, ok := base.Verdicts[v.Name]
			switch {
			case !ok:
				v.BaselineState = "new"
			case was.Level == v.Level && was.Cells == v.Cells:
				v.BaselineState, v.Was = "unchanged", was.String()
			default:
				v.BaselineState, v.Was = "updated", was.String()
			}
			worse := !ok || v.Level > was.Level || v.Level == was.Level && v.Cells > was.Cells
			if v.Fails && !worse {
				fmt.Fprintf(w, "baseline: %s is %s as it was (%s; now %d cells): not a failure\n", v.Name, v.Level, v.Was, v.Cells)
			}
			v.Fails = v.Fails && worse
		}
		if v.Fails {
			fails++
		}
	}
	return fails
}

// BaselineSchema is the version of a baseline check writes (its JSON's
// schema): 2 since the graded verdicts.
const BaselineSchema = CheckSchema

// Baseline is a previous check's verdicts, by fleet or chain name, and
// the settings it ran with, which a comparison must share.
type Baseline struct {
	Settings Settings
	Verdicts map[string]Was
}

// Was is one verdict of a baseline.
type Was struct {
	Level Level
	Cells int
}

func (w Was) String() string {
	if w.Level == Safe {
		return w.Level.String()
	}
	return fmt.Sprintf("%s (%d cells)", w.Level, w.Cells)
}

// Settings are what a check ran with that changes its verdicts: a
// baseline made with other settings cannot be compared with.
type Settings struct {
	Scenario  string
	Seed      uint64
	Seeds     int
	Clients   []int
	Load, Dip float64
	Loads     []float64
	Faults    []string
}

// SettingsOf are r's settings.
func SettingsOf(r *CheckResult) Settings {
	s := Settings{Scenario: r.Scenario, Seed: r.Seed, Seeds: len(r.Seeds), Clients: r.Clients, Load: r.RealLoad, Dip: r.RealDip, Loads: r.Loads}
	for _, f := range r.Faults {
		s.Faults = append(s.Faults, f.Name)
	}
	return s
}

// Differs says how s differs from t, or "" when they are the same.
func (s Settings) Differs(t Settings) string {
	var out []string
	if s.Scenario != t.Scenario || s.Seed != t.Seed {
		out = append(out, fmt.Sprintf("base scenario %q seed %d, not %q seed %d", s.Scenario, s.Seed, t.Scenario, t.Seed))
	}
	if s.Seeds != t.Seeds {
		out = append(out, fmt.Sprintf("--seeds %d, not %d", s.Seeds, t.Seeds))
	}
	if !slices.Equal(s.Clients, t.Clients) {
		out = append(out, fmt.Sprintf("--clients %d, not %d", first(s.Clients), first(t.Clients)))
	}
	if s.Load != t.Load {
		out = append(out, fmt.Sprintf("--load %g, not %g", s.Load, t.Load))
	}
	if s.Dip != t.Dip {
		out = append(out, fmt.Sprintf("--dip %g, not %g", s.Dip, t.Dip))
	}
	if !slices.Equal(s.Loads, t.Loads) || !slices.Equal(s.Faults, t.Faults) {
		out = append(out, "another envelope of loads and faults")
	}
	return strings.Join(out, "; ")
}

func first(v []int) int {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// ReadBaseline reads a previous check --json (of files, of a stack, or of
// --manifests), from the file called name. A baseline written before
// graded verdicts (no schema) or by another schema is refused with how to
// make one again.
func ReadBaseline(name string, data []byte) (*Baseline, error) {
	var doc struct {
		Check *CheckResult `json:"check"`
		Chain string       `json:"chain"`
		Shard string       `json:"stack_shard"`
		// --manifests: each chain's verdict, its check among the
		// distinct ones (a baseline of an earlier version has each
		// chain's check in the chain).
		Chains   []*baselineChain `json:"chains"`
		Distinct []*CheckResult   `json:"distinct"`
		CheckResult
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("--baseline %s: not the JSON of retrystorm check --json: %v", name, err)
	}
	if doc.Shard != "" {
		return nil, fmt.Errorf("--baseline %s: a shard's result (stack_shard %s): give the JSON of retrystorm merge or of a whole check", name, doc.Shard)
	}
	// named is a check result and the name its verdict is known by: a
	// chain's whole name (its fleet's is cut at maxSimName), else each
	// fleet's; was, when set, is the chain's verdict as the file says it.
	type named struct {
		r     *CheckResult
		chain string
		was   *Was
	}
	var results []named
	switch {
	case doc.Check != nil:
		results = append(results, named{r: doc.Check, chain: doc.Chain})
	case doc.Chains != nil:
		for _, c := range doc.Chains {
			switch {
			case c == nil:
			case c.Check != nil:
				results = append(results, named{r: c.Check, chain: c.Chain})
			case c.Distinct >= 0 && c.Distinct < len(doc.Distinct) && doc.Distinct[c.Distinct] != nil:
				results = append(results, named{r: doc.Distinct[c.Distinct], chain: c.Chain, was: &Was{Level: c.Level, Cells: c.FailingCells}})
			default:
				return nil, fmt.Errorf("--baseline %s: chain %q: its distinct chain %d is not in the file", name, c.Chain, c.Distinct)
			}
		}
	default:
		results = append(results, named{r: &doc.CheckResult})
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("--baseline %s: not the JSON of retrystorm check --json (no fleets)", name)
	}
	b := &Baseline{Verdicts: map[string]Was{}}
	for k, n := range results {
		r := n.r
		if r.Schema != BaselineSchema {
			return nil, fmt.Errorf("--baseline %s: written by another version of retrystorm (schema %d; this one reads %d, whose verdicts are graded SAFE, AT RISK and UNSAFE): make it again with this version's check --json, with the same flags", name, r.Schema, BaselineSchema)
		}
		if len(r.Fleets) == 0 || len(r.Clients) == 0 || len(r.Faults) == 0 {
			return nil, fmt.Errorf("--baseline %s: not the JSON of retrystorm check --json (no fleets, faults or client counts)", name)
		}
		if k == 0 {
			b.Settings = SettingsOf(r)
		}
		for i, f := range r.Fleets {
			if len(f.Runs) != len(r.Clients) {
				return nil, fmt.Errorf("--baseline %s: fleet %q has no runs: give a whole check's JSON, not a shard's", name, f.Name)
			}
			switch {
			case n.was != nil:
				b.Verdicts[n.chain] = *n.was
			case n.chain != "":
				b.Verdicts[n.chain] = Was{Level: f.Verdict, Cells: r.FailingCells(i)}
			default:
				b.Verdicts[f.Name] = Was{Level: f.Verdict, Cells: r.FailingCells(i)}
			}
		}
	}
	return b, nil
}

// baselineChain is a chain of check --manifests --json as a baseline
// reads it: this version's (a ManifestChain) or an earlier one's (a
// StackResult, with its check).
type baselineChain struct {
	Chain        string       `json:"chain"`
	Level        Level        `json:"verdict"`
	Distinct     int          `json:"distinct"`
	FailingCells int          `json:"failing_cells"`
	Check        *CheckResult `json:"check"`
}

// SARIF 2.1.0 (OASIS, sarif-schema-2.1.0.json): the parts check writes.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
	HelpURI          string       `json:"helpUri,omitempty"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID        string          `json:"ruleId"`
	Level         string          `json:"level"`
	BaselineState string          `json:"baselineState,omitempty"`
	Message       sarifMessage    `json:"message"`
	Locations     []sarifLocation `json:"locations,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

const sarifRuleID = "retry-storm"

// WriteSARIF writes one result per setting to blame of each verdict that
// is not SAFE, at its file and line: an error for UNSAFE, a warning for
// AT RISK, and, with a baseline, SARIF's baselineState (new, unchanged,
// updated) rather than another level for what the baseline forgives.
func WriteSARIF(w io.Writer, vs []CIResult) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "retrystorm", InformationURI: "https://github.com/retrystorm/retrystorm",
		Rules: []sarifRule{{ID: sarifRuleID, ShortDescription: sarifMessage{Text: "a retry policy that turns a dip into a storm: it stays collapsed, or amplifies the load past the thresholds, in the realistic region"},
			HelpURI: "https://github.com/retrystorm/retrystorm/blob/main/docs/check.md"}}}}, Results: []sarifResult{}}
	for _, v := range vs {
		if v.Level == Safe {
			continue
		}
		level := "warning" // AT RISK
		if v.Level == Unsafe {
			level = "error"
		}
		text := v.Name + ": " + v.Text
		if v.Margin != "" {
			text += ". Margin: " + v.Margin
		}
		for _, bl := range v.Blame {
			res := sarifResult{RuleID: sarifRuleID, Level: level, BaselineState: v.BaselineState,
				Message: sarifMessage{Text: fmt.Sprintf("%s. To blame, in layer %s, %s: %s", text, bl.Layer, bl.Setting, bl.Why)}}
			if bl.File != "" {
				loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: filepath.ToSlash(bl.File)}}}
				if bl.Line > 0 {
					loc.PhysicalLocation.Region = &sarifRegion{StartLine: bl.Line}
				}
				res.Locations = []sarifLocation{loc}
			}
			run.Results = append(run.Results, res)
		}
	}
	return writeJSONTo(w, sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}})
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JUnit XML, as CI systems read it: one test case per fleet or chain.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes one test case per fleet or chain: a failure where the
// verdict fails.
func WriteJUnit(w io.Writer, vs []CIResult) error {
	var b bytes.Buffer
	s := junitSuite{Name: "retrystorm check", Tests: len(vs)}
	for _, v := range vs {
		c := junitCase{Name: v.Name, Classname: "retrystorm.check", SystemOut: v.Text}
		if v.Fails {
			s.Failures++
			var lines []string
			for _, bl := range v.Blame {
				at := bl.File
				if bl.Line > 0 {
					at = fmt.Sprintf("%s:%d", bl.File, bl.Line)
				}
				lines = append(lines, fmt.Sprintf("%s: %s (%s): %s", at, bl.Setting, bl.Layer, bl.Why))
			}
			c.Failure = &junitFailure{Message: v.Text, Type: levelKeys[v.Level], Text: strings.Join(lines, "\n")}
		}
		s.Cases = append(s.Cases, c)
	}
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	b.WriteString("\n")
	_, err := w.Write(b.Bytes())
	return err
}
