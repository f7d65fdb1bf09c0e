package verdict

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Finding is one checked fleet or chain as a CI sees it: a test case, and
// the settings to blame as annotations at their file and line.
type Finding struct {
	Name   string
	Origin string
	Unsafe bool
	// Cells is how many realistic cells fail: a baseline compares it.
	Cells int
	// Text is the verdict in words (check's verdict line).
	Text  string
	Blame []Blame
	// Fails: unsafe, and (with a baseline) worse than it was.
	Fails bool
	// Was is the baseline's verdict: "" (no baseline, or not in it),
	// "safe", or "UNSAFE (N cells)".
	Was string
}

// VerdictLine is check's verdict line for fleet i.
func VerdictLine(r *CheckResult, i int) string {
	for _, l := range r.Verdicts()[i] {
		if strings.HasPrefix(l, "verdict: ") {
			return strings.TrimPrefix(l, "verdict: ")
		}
	}
	return ""
}

// StackFindings is a checked stack as a CI sees it: one finding, the
// chain, with every layer's settings to blame.
func StackFindings(r *StackResult) []Finding {
	v := Finding{Name: r.Check.Fleets[0].Name, Origin: r.Chain, Unsafe: r.Unsafe, Cells: r.Check.UnsafeCells(0), Text: VerdictLine(r.Check, 0)}
	if r.Unsafe {
		for _, l := range r.Layers {
			v.Blame = append(v.Blame, l.Blame...)
		}
	}
	return []Finding{v}
}

// CheckFindings are check's fleets as a CI sees them; blame(i) gives
// the settings to blame of unsafe fleet i, located in the user's files.
func CheckFindings(r *CheckResult, blame func(i int) []Blame) []Finding {
	var out []Finding
	for i, f := range r.Fleets {
		v := Finding{Name: f.Name, Origin: f.Origin, Unsafe: r.Unsafe(i), Cells: r.UnsafeCells(i), Text: VerdictLine(r, i)}
		if v.Unsafe {
			v.Blame = blame(i)
		}
		out = append(out, v)
	}
	return out
}

// ReadBaseline reads a previous check --json (of files or of a stack),
// from the file called name, and returns each fleet's (or chain's)
// failing realistic cells by name.
func ReadBaseline(name string, data []byte) (map[string]int, error) {
	var doc struct {
		Check *CheckResult `json:"check"`
		CheckResult
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("--baseline %s: not the JSON of retrystorm check --json: %v", name, err)
	}
	r := doc.Check
	if r == nil {
		r = &doc.CheckResult
	}
	if len(r.Fleets) == 0 || len(r.Clients) == 0 || len(r.Faults) == 0 {
		return nil, fmt.Errorf("--baseline %s: not the JSON of retrystorm check --json (no fleets, faults or client counts)", name)
	}
	out := map[string]int{}
	for i, f := range r.Fleets {
		if len(f.Runs) != len(r.Clients) {
			return nil, fmt.Errorf("--baseline %s: fleet %q has no runs: give a whole check's JSON, not a shard's", name, f.Name)
		}
		out[f.Name] = r.UnsafeCells(i)
	}
	return out, nil
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
	RuleID    string          `json:"ruleId"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
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

// WriteSARIF writes one result per setting to blame of each unsafe
// verdict, at its file and line: an error where the verdict fails, a
// warning where a baseline forgives it.
func WriteSARIF(w io.Writer, vs []Finding) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "retrystorm", InformationURI: "https://github.com/retrystorm/retrystorm",
		Rules: []sarifRule{{ID: sarifRuleID, ShortDescription: sarifMessage{Text: "a retry policy that turns a dip into a storm: it stays collapsed, or amplifies the load past the thresholds, in the realistic region"},
			HelpURI: "https://github.com/retrystorm/retrystorm/blob/main/docs/check.md"}}}}, Results: []sarifResult{}}
	for _, v := range vs {
		if !v.Unsafe {
			continue
		}
		level := "error"
		if !v.Fails {
			level = "warning"
		}
		for _, bl := range v.Blame {
			res := sarifResult{RuleID: sarifRuleID, Level: level,
				Message: sarifMessage{Text: fmt.Sprintf("%s: %s. To blame, in layer %s, %s: %s", v.Name, v.Text, bl.Layer, bl.Setting, bl.Why)}}
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
func WriteJUnit(w io.Writer, vs []Finding) error {
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
			c.Failure = &junitFailure{Message: v.Text, Type: "unsafe", Text: strings.Join(lines, "\n")}
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
