package promtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Answer is a saved query_range answer (what calibrate --file reads), as
// the tests read, edit and write it: each sample a pair of its time (a
// number, Unix seconds) and its value (a string, as Prometheus writes it).
type Answer struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string         `json:"resultType"`
		Result     []AnswerSeries `json:"result"`
	} `json:"data"`
}

// AnswerSeries is one series of an Answer.
type AnswerSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// ReadAnswer reads file, failing t if it cannot.
func ReadAnswer(t testing.TB, file string) Answer {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var a Answer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// Write writes a as file (its directory made if need be) and returns
// file.
func (a Answer) Write(t testing.TB, file string) string {
	t.Helper()
	return WriteAnswer(t, file, a.Data.Result)
}

// WriteAnswer writes result (a model.Matrix, or an Answer's series) as a
// successful query_range answer in file, its directory made if need be,
// and returns file.
func WriteAnswer(t testing.TB, file string, result any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": result}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Edited returns a copy of a with edit applied to each series (a copy of
// it, its samples copied too): a changed series does not change a.
func (a Answer) Edited(edit func(s AnswerSeries) AnswerSeries) Answer {
	out := a
	out.Data.Result = make([]AnswerSeries, 0, len(a.Data.Result))
	for _, s := range a.Data.Result {
		c := AnswerSeries{Metric: map[string]string{}, Values: slices.Clone(s.Values)}
		for k, v := range s.Metric {
			c.Metric[k] = v
		}
		out.Data.Result = append(out.Data.Result, edit(c))
	}
	return out
}
