package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrystorm/retrystorm/internal/boundedfile"
	"github.com/retrystorm/retrystorm/internal/safetext"
)

// maxAnswer is the largest answer calibrate reads, from a file or a
// server: about MaxSeries series of a day at 15 s.
const maxAnswer = 64 << 20

// maxFiles bounds the files of a directory.
const maxFiles = 1000

// ReadAnswers reads saved query_range answers: files, or directories of
// *.json files. Each series must carry its metric name (the answer of a
// plain selector); sel narrows them.
func ReadAnswers(paths []string, sel Selector) (*Window, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no *.json file in the directory", p)
		}
		slices.Sort(m)
		files = append(files, m...)
	}
	if len(files) > maxFiles {
		return nil, fmt.Errorf("%d files: at most %d", len(files), maxFiles)
	}
	w := &Window{Where: "saved answers " + strings.Join(shortNames(files), ", ")}
	for _, f := range files {
		data, err := boundedfile.Read(f, maxAnswer)
		if err != nil {
			return nil, err
		}
		m, err := parseAnswer(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if err := w.add(m, sel, "", "", f); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
	}
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("%s: %v", strings.Join(files, ", "), err)
	}
	return w, nil
}

func shortNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = safetext.Name(filepath.Base(f))
	}
	if len(out) > 4 {
		out = append(out[:3], fmt.Sprintf("and %d more", len(files)-3))
	}
	return out
}

// Live says what to read from a Prometheus server.
type Live struct {
	URL        string
	Start, End time.Time
	Step       time.Duration
	Selector   Selector
	// Source names the product; nil: every known source's metrics are
	// looked for.
	Source *Source
	// Timeout bounds each request to the server.
	Timeout time.Duration
	// Access is the credentials and the CA the server wants, if any.
	Access Access
}

// Fetch reads a window from a Prometheus server through its HTTP API
// (client_golang's api/prometheus/v1): for each metric the source reads,
// it first counts the series the selector matches (the series endpoint,
// with a limit) and refuses more than MaxSeries, then reads their raw
// samples with query_range.
func Fetch(ctx context.Context, l Live) (*Window, error) {
	if !l.End.After(l.Start) {
		return nil, fmt.Errorf("the window ends (%s) before it starts (%s)", l.End.Format(time.RFC3339), l.Start.Format(time.RFC3339))
	}
	if l.Step <= 0 {
		return nil, errors.New("the step must be positive")
	}
	if n := l.End.Sub(l.Start) / l.Step; n > MaxSteps {
		return nil, fmt.Errorf("%s at a step of %s is %d steps: at most %d (a longer --step, or a shorter window)", l.End.Sub(l.Start), l.Step, n, MaxSteps)
	}
	if l.Timeout <= 0 {
		l.Timeout = 30 * time.Second
	}
	hc, err := l.Access.client(l.Timeout)
	if err != nil {
		return nil, err
	}
	client, err := api.NewClient(api.Config{Address: l.URL, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("--prometheus %s: %v", redact(l.URL), err)
	}
	prom := v1.NewAPI(client)
	sources := Sources
	if l.Source != nil {
		sources = []*Source{l.Source}
	}
	w := &Window{Where: "Prometheus at " + redact(l.URL), Start: l.Start.UTC(), End: l.End.UTC(), Step: l.Step}
	// Which sources are there: one series query for their detecting
	// metrics; of several, the first whose requests counted some in the
	// window (an idle HAProxy job beside a busy service is no calibration).
	var found []*Source
	for _, s := range sources {
		n, err := countSeries(ctx, prom, l, s.Detect...)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			found = append(found, s)
		}
	}
	var metrics []string
	if len(found) > 0 {
		metrics = found[0].Metrics()
	}
	if len(found) > 1 {
		for _, s := range found {
			busy, err := counted(ctx, prom, l, s)
			if err != nil {
				return nil, err
			}
			if busy {
				metrics = s.Metrics()
				if s != found[0] {
					w.Notes = append(w.Notes, fmt.Sprintf("%s's metrics are there too, but %s's requests are the ones that counted some in the window: calibrating %s", found[0].Name, s.Name, s.Name))
				}
				break
			}
		}
	}
	if metrics == nil {
		var want []string
		for _, s := range sources {
			want = append(want, s.Detect...)
		}
		return nil, fmt.Errorf("%s has no series of %s matching %s between %s and %s: a wrong selector, or an empty window", redact(l.URL), strings.Join(want, ", "), l.Selector, l.Start.Format(time.RFC3339), l.End.Format(time.RFC3339))
	}
	for _, m := range metrics {
		if err := readMetric(ctx, prom, l, w, m); err != nil {
			return nil, err
		}
	}
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("%s: %v", redact(l.URL), err)
	}
	return w, nil
}

// readMetric adds metric's series to w: those the selector matches (none
// is nothing), with their raw samples (query_range).
func readMetric(ctx context.Context, prom v1.API, l Live, w *Window, metric string) error {
	n, err := countSeries(ctx, prom, l, metric)
	if err != nil || n == 0 {
		return err
	}
	query := l.Selector.For(metric)
	val, _, _, err := prom.QueryRange(ctx, query, v1.Range{Start: l.Start, End: l.End, Step: l.Step}, v1.WithTimeout(l.Timeout))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("query_range %s: %w", query, l.readError(err))
	}
	mat, ok := val.(model.Matrix)
	if !ok {
		return fmt.Errorf("%s: query_range %s answered a %s, not a matrix", redact(l.URL), query, val.Type())
	}
	return w.add(mat, l.Selector, fmt.Sprintf("query_range %s", query), metric, query)
}

// counted reports whether s's request counter counted requests in the
// window, from its raw samples as Fit reads them.
func counted(ctx context.Context, prom v1.API, l Live, s *Source) (bool, error) {
	w := &Window{Start: l.Start, End: l.End, Step: l.Step}
	if err := readMetric(ctx, prom, l, w, s.Attempts.Metric); err != nil || !w.Has(s.Attempts.Metric) {
		return false, err
	}
	return Counter(w, s.Attempts).total() > 0, nil
}

// countSeries counts the series of the metrics the selector matches in
// the window, up to MaxSeries+1, and refuses more.
func countSeries(ctx context.Context, prom v1.API, l Live, metrics ...string) (int, error) {
	total := 0
	for _, m := range metrics {
		match := l.Selector.For(m)
		sets, _, _, err := prom.Series(ctx, []string{match}, l.Start, l.End, v1.WithLimit(MaxSeries+1))
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, l.readError(err)
		}
		if len(sets) > MaxSeries {
			return 0, fmt.Errorf("%s matches more than %d series at %s: narrow --selector to one service (a job, a cluster, a namespace), so that calibrate reads one origin and its clients", match, MaxSeries, redact(l.URL))
		}
		total += len(sets)
	}
	return total, nil
}

// sameHost follows a redirect only to the server asked (its scheme, host
// and port): a Prometheus that redirects elsewhere would have calibrate
// send its queries, and read its window, from a server nobody named (a
// compromised or misconfigured proxy, an internal address). At most 10,
// as net/http.
func sameHost(r *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= 10:
		return fmt.Errorf("%s: stopped after 10 redirects", first.Redacted())
	case r.URL.Scheme != first.Scheme || r.URL.Host != first.Host:
		return fmt.Errorf("%s redirected to %s: calibrate follows a redirect only on the server it was given (the same scheme, host and port); give --prometheus that address if you trust it", first.Redacted(), r.URL.Redacted())
	}
	return nil
}

// limited refuses an answer larger than maxAnswer: a body that goes on
// past it ends in an error, not in memory. An answer refusing the
// credentials is an error too (refusal), which Live.readError words.
type limited struct{ http.RoundTripper }

func (l limited) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.RoundTripper.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if err := refusal(r, res); err != nil {
		res.Body.Close()
		return nil, err
	}
	if res.ContentLength > maxAnswer {
		res.Body.Close()
		return nil, fmt.Errorf("the answer is %d bytes: at most %d (a narrower selector, a longer step, a shorter window)", res.ContentLength, maxAnswer)
	}
	res.Body = &capped{r: res.Body, left: maxAnswer}
	return res, nil
}

type capped struct {
	r    io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("the answer is longer than %d bytes (a narrower selector, a longer step, a shorter window)", maxAnswer)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.r.Close() }
