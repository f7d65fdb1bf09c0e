package page

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/page/live"
)

// The lede counts the experiments the page shows: it said "Eight
// experiments" over nine panels (issue 27).
func TestLedeCountsThePanels(t *testing.T) {
	panels, err := live.Panels()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := render(Assets{Module: []byte("m"), WasmExec: []byte("//")}, views(t))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`<p class="lede">%s experiments,`, upperFirst(countWord(len(panels))))
	if !strings.Contains(string(doc), want) {
		t.Errorf("the page's lede does not say %q", want)
	}
	for n, w := range map[int]string{1: "one", 9: "nine", 20: "twenty", 21: "21"} {
		if got := countWord(n); got != w {
			t.Errorf("countWord(%d) = %q, want %q", n, got, w)
		}
	}
}

// The README says how large the page is as the page command says it
// (MB of 2^20 bytes, one decimal), within a tenth: it said 2.5 MB of a
// page of 3.4 (issue 27).
func TestReadmePageSize(t *testing.T) {
	if testing.Short() {
		// Render computes every panel: minutes under the race detector,
		// which CI runs with -short. The full pass measures the page.
		t.Skip("the page is rendered and measured without -short")
	}
	a, ok := Embedded()
	if !ok {
		servertest.Missing(t, "this build embeds no module: run go generate ./page")
	}
	doc, err := Render(a)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`writes one HTML file \(([0-9.]+) MB\)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README does not say how large the page is")
	}
	said, _ := strconv.ParseFloat(string(m[1]), 64)
	size := float64(len(doc)) / (1 << 20)
	if said < 0.9*size || said > 1.1*size {
		t.Errorf("the README says the page is %s MB; it is %.1f MB", m[1], size)
	}
}
