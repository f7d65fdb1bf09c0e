package importer

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// SARIF 2.1.0 fix objects (OASIS SARIF 2.1.0, §3.55 fix, §3.56
// artifactChange, §3.57 replacement, §3.30 region; sarif-schema-2.1.0.json
// in oasis-tcs/sarif-spec's Schemata): an edit carried on the result it
// answers, so that a code-scanning tool can show it and apply it.
//
// Regions are given by line and column, 1-based, columns counted in
// UTF-16 code units: the run that carries them says so with
// "columnKind": SARIFColumnKind. A replacement replaces whole lines (the
// line ends of the deleted ones included), except at the end of a file
// whose last line ends with a newline, where the region stops before that
// newline so that it never names a line past the last (only a change that
// dropped a file's last newline would need that position; edits keep a
// file's line ends).

// SARIFColumnKind is the run.columnKind the regions of a SARIFFix use.
const SARIFColumnKind = "utf16CodeUnits"

// SARIFFix is a SARIF fix: a description and, per file, its changes.
type SARIFFix struct {
	Description     *SARIFMessage         `json:"description,omitempty"`
	ArtifactChanges []SARIFArtifactChange `json:"artifactChanges"`
}

// SARIFMessage is a SARIF message with text.
type SARIFMessage struct {
	Text string `json:"text"`
}

// SARIFArtifactChange is the replacements in one file.
type SARIFArtifactChange struct {
	ArtifactLocation SARIFArtifactLocation `json:"artifactLocation"`
	Replacements     []SARIFReplacement    `json:"replacements"`
}

// SARIFArtifactLocation names a file by a relative URI reference.
type SARIFArtifactLocation struct {
	URI string `json:"uri"`
}

// SARIFReplacement deletes a region and inserts text in its place; an
// empty region is an insertion point.
type SARIFReplacement struct {
	DeletedRegion   SARIFRegion           `json:"deletedRegion"`
	InsertedContent *SARIFArtifactContent `json:"insertedContent,omitempty"`
}

// SARIFRegion is a span of text: from (StartLine, StartColumn) up to, not
// including, (EndLine, EndColumn).
type SARIFRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
	EndLine     int `json:"endLine"`
	EndColumn   int `json:"endColumn"`
}

// SARIFArtifactContent is text to insert.
type SARIFArtifactContent struct {
	Text string `json:"text"`
}

// SARIFFixOf writes the edited files as one SARIF fix described by
// description. A new file (Before nil) is one insertion at its start:
// SARIF has no way to say "create", and a consumer that applies fixes to
// existing files only will skip it; the description should say where it
// goes.
func SARIFFixOf(description string, edited []Edited) (SARIFFix, error) {
	if len(edited) == 0 {
		return SARIFFix{}, errors.New("importer: a fix with no edited file")
	}
	fix := SARIFFix{ArtifactChanges: []SARIFArtifactChange{}}
	if description != "" {
		fix.Description = &SARIFMessage{Text: description}
	}
	for _, e := range edited {
		if !utf8.Valid(e.Before) || !utf8.Valid(e.After) {
			return SARIFFix{}, fmt.Errorf("importer: %s is not UTF-8 text, which a SARIF fix (JSON) cannot carry", e.Name)
		}
		reps := sarifReplacements(e.Before, e.After)
		if len(reps) == 0 {
			continue
		}
		fix.ArtifactChanges = append(fix.ArtifactChanges, SARIFArtifactChange{
			ArtifactLocation: SARIFArtifactLocation{URI: sarifURI(e.Name)},
			Replacements:     reps,
		})
	}
	if len(fix.ArtifactChanges) == 0 {
		return SARIFFix{}, errors.New("importer: a fix whose files do not change")
	}
	return fix, nil
}

// sarifURI writes a file name as a relative URI reference (RFC 3986):
// forward slashes, and what a path may not hold escaped.
func sarifURI(name string) string {
	return (&url.URL{Path: filepath.ToSlash(name)}).EscapedPath()
}

// sarifReplacements turns the change from before to after into
// replacements of whole lines, one per run of changed lines.
func sarifReplacements(before, after []byte) []SARIFReplacement {
	ops := lineOps(diffLines(before), diffLines(after))
	var out []SARIFReplacement
	at := 0 // the offset in before of the op being read
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			at += len(ops[i].line)
			i++
			continue
		}
		start, end := at, at
		var ins strings.Builder
		for ; i < len(ops) && ops[i].kind != ' '; i++ {
			if ops[i].kind == '-' {
				end += len(ops[i].line)
			} else {
				ins.WriteString(ops[i].line)
			}
		}
		at = end
		text := ins.String()
		if end == len(before) && end > 0 && before[end-1] == '\n' {
			// Keep the region within the file's lines: leave its last
			// newline where it is (the newline before the region stands
			// for it when the region's lines go with nothing after them).
			switch {
			case strings.HasSuffix(text, "\n"):
				if start == end {
					start, text = start-1, "\n"+text
				}
				end, text = end-1, text[:len(text)-1]
			case text == "" && start > 0:
				start, end = start-1, end-1
			}
		}
		r := SARIFReplacement{DeletedRegion: sarifRegion(before, start, end)}
		if text != "" || start == end {
			r.InsertedContent = &SARIFArtifactContent{Text: text}
		}
		out = append(out, r)
	}
	return out
}

// sarifRegion is the region of before[start:end].
func sarifRegion(before []byte, start, end int) SARIFRegion {
	sl, sc := sarifPosition(before, start)
	el, ec := sarifPosition(before, end)
	return SARIFRegion{StartLine: sl, StartColumn: sc, EndLine: el, EndColumn: ec}
}

// sarifPosition is the line and column (in UTF-16 code units) of offset.
func sarifPosition(b []byte, offset int) (line, col int) {
	line, lineStart := 1, 0
	for i := 0; i < offset; i++ {
		if b[i] == '\n' {
			line, lineStart = line+1, i+1
		}
	}
	return line, len(utf16.Encode([]rune(string(b[lineStart:offset])))) + 1
}
