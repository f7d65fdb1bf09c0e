package resilhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
)

// nopWriter is a ResponseWriter that keeps nothing, so that the benchmarks
// measure the middleware, not the recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkShed measures the middleware's overhead per request: the same
// empty handler bare and behind Shed, for an admitted request without a
// deadline header, with one (the handler then runs under a context with
// that deadline), and for a refusal. The overhead is the difference with
// "bare".
func BenchmarkShed(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	fixed, _ := admission.NewLimiter(admission.FixedLimit{Limit: 1 << 20})
	gradient, _ := admission.NewLimiter(admission.GradientLimit{MaxLimit: 1 << 20})
	mk := func(s admission.ShedderSettings) http.Handler {
		sh, err := admission.NewShedder(s)
		if err != nil {
			b.Fatal(err)
		}
		return Shed(sh)(handler)
	}
	plain := httptest.NewRequest(http.MethodGet, "/", nil)
	timed := httptest.NewRequest(http.MethodGet, "/", nil)
	timed.Header.Set(TimeoutHeader, FormatTimeout(time.Hour))
	expired := httptest.NewRequest(http.MethodGet, "/", nil)
	expired.Header.Set(TimeoutHeader, "0n")
	for _, c := range []struct {
		name string
		h    http.Handler
		r    *http.Request
	}{
		{"bare", handler, plain},
		{"admitted/fixed", mk(admission.ShedderSettings{Limiter: fixed}), plain},
		{"admitted/gradient", mk(admission.ShedderSettings{Limiter: gradient, Deadline: admission.DeadlineSettings{Learn: true}}), plain},
		{"admitted/fixed+timeout-header", mk(admission.ShedderSettings{Limiter: fixed, Deadline: admission.DeadlineSettings{ServiceTime: time.Millisecond}}), timed},
		{"refused/expired", mk(admission.ShedderSettings{Limiter: fixed}), expired},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			w := &nopWriter{h: http.Header{}}
			for b.Loop() {
				c.h.ServeHTTP(w, c.r)
				clear(w.h)
			}
		})
	}
}
