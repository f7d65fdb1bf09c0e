package resilhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/resil/admission"
	"github.com/retrystorm/retrystorm/resil/resilhttp"
)

// A server that sheds what it cannot answer in time: its work takes about
// 50ms, so a request whose caller has 20ms left is refused at once with a
// 503 instead of being served late; one with a second left is served, and
// its handler sees the caller's deadline on its context.
func ExampleShed() {
	lim, _ := admission.NewLimiter(admission.GradientLimit{Limit: 50})
	sh, err := admission.NewShedder(admission.ShedderSettings{
		Limiter:  lim,
		Deadline: admission.DeadlineSettings{ServiceTime: 50 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	work := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := r.Context().Deadline()
		fmt.Fprintf(w, "served, deadline on the context: %v", ok)
	})
	h := resilhttp.Shed(sh)(work)

	for _, left := range []time.Duration{20 * time.Millisecond, time.Second} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(resilhttp.TimeoutHeader, resilhttp.FormatTimeout(left))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%v left: %d %s %s\n", left, w.Code, w.Header().Get(resilhttp.ShedHeader), strings.TrimSpace(w.Body.String()))
	}
	st := sh.Stats()
	fmt.Println("admitted", st.Admitted, "too late", st.Shed[admission.ShedTooLate])
	// Output:
	// 20ms left: 503 too_late resil: request shed: too_late
	// 1s left: 200  served, deadline on the context: true
	// admitted 1 too late 1
}
