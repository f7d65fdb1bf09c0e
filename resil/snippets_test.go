package resil_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

// The Go snippets of README.md, docs/*.md and this package's doc.go are
// compiled and run here: each is the marked region of an example below
// (between "// snippet: FILE" and "// end snippet", one tab of
// indentation less), and TestSnippetsAreExamples fails when a snippet is
// not, word for word, such a region.

// The README's "Using resil": the call fails twice and the Guard retries
// it, paid from the budget, so it succeeds on its third attempt.
func ExampleGuard_readme() {
	ctx := context.Background()
	seed1, seed2 := uint64(1), uint64(2)
	failures := 2
	call := func(context.Context) error {
		if failures > 0 {
			failures--
			return errors.New("503 Service Unavailable")
		}
		return nil
	}
	// snippet: README.md
	bucket, _ := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio: 0.1, Funding: budget.FundedBySuccess, MinTokens: 10,
	})
	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5, Cooldown: 5 * time.Second})
	guard, _ := resil.NewGuard(resil.GuardSettings{
		Idempotency: resil.Idempotent, // required with retries: may this call run twice?
		Policy: resil.Policy{
			MaxRetries: 3,
			Backoff:    resil.Backoff{Schedule: resil.Exponential, Base: 100 * time.Millisecond, Cap: 10 * time.Second, Jitter: resil.FullJitter},
			Budget:     bucket,
			Breaker:    breaker,
		},
		Rand: rand.NewPCG(seed1, seed2),
	})
	err := guard.Do(ctx, func(ctx context.Context) error { return call(ctx) })
	// end snippet
	s := guard.Stats()
	fmt.Printf("err %v after %d attempts, %d retries, %g tokens left\n", err, s.Attempts, s.Retries, bucket.Tokens(time.Now()))
	// Output: err <nil> after 3 attempts, 2 retries, 8.1 tokens left
}

// The package documentation's guarded call: a dependency that fails
// once, then answers.
func ExampleGuard_package() {
	ctx := context.Background()
	failed := false
	callTheDependency := func(ctx context.Context) error {
		if !failed {
			failed = true
			return errors.New("connection reset")
		}
		return nil
	}
	// snippet: resil/doc.go
	bucket, _ := budget.NewTokenBucket(budget.TokenBucketSettings{
		Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10,
	})
	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
	g, _ := resil.NewGuard(resil.GuardSettings{
		Idempotency:    resil.Idempotent,
		AttemptTimeout: time.Second,
		Policy: resil.Policy{
			MaxRetries: 3, Budget: bucket, Breaker: breaker,
			Backoff: resil.Backoff{Schedule: resil.Exponential,
				Base: 50 * time.Millisecond, Cap: 5 * time.Second, Jitter: resil.FullJitter},
		},
	})
	err := g.Do(ctx, func(ctx context.Context) error { return callTheDependency(ctx) })
	// end snippet
	fmt.Println("err:", err, "retries:", g.Stats().Retries)
	// Output: err: <nil> retries: 1
}

// snippet is a Go snippet of the documentation: where it is, and its text.
type snippet struct {
	where, text string
}

// docSnippets returns the ```go blocks of README.md and docs/*.md, and the
// code blocks (tab-indented comment lines) of resil/doc.go.
func docSnippets(t *testing.T) []snippet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	fence := regexp.MustCompile("(?s)```go\n(.*?)```")
	for _, f := range append([]string{filepath.Join("..", "README.md")}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatch(b, -1) {
			out = append(out, snippet{strings.TrimPrefix(filepath.ToSlash(f), "../"), string(m[1])})
		}
	}
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var block strings.Builder
	flush := func() {
		if block.Len() > 0 {
			out = append(out, snippet{"resil/doc.go", block.String()})
			block.Reset()
		}
	}
	for line := range strings.Lines(string(b)) {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			block.WriteString(code)
			continue
		}
		flush()
	}
	flush()
	return out
}

// exampleRegions returns the marked regions of the example files of this
// package and of resil/admission, by the file their snippet is from.
func exampleRegions(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err == nil {
		var sub []string // the README's server-side snippet is package admission's
		sub, err = filepath.Glob(filepath.Join("admission", "*_test.go"))
		files = append(files, sub...)
	}
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string][]string{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var (
			from string
			text strings.Builder
			in   bool
		)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimPrefix(sc.Text(), "\t")
			trimmed := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(trimmed, "// snippet: "):
				from, in = strings.TrimPrefix(trimmed, "// snippet: "), true
				text.Reset()
			case trimmed == "// end snippet" && in:
				regions[from] = append(regions[from], text.String())
				in = false
			case in:
				text.WriteString(line + "\n")
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return regions
}

// TestSnippetsAreExamples: every Go snippet of the documentation is,
// exactly, a region of an example of this package that is compiled and
// run with its output checked; so no snippet can stop compiling, or stop
// doing what the page says, unnoticed.
func TestSnippetsAreExamples(t *testing.T) {
	snippets := docSnippets(t)
	regions := exampleRegions(t)
	seen := map[string]int{}
	for _, s := range snippets {
		seen[s.where]++
		found := false
		for _, r := range regions[s.where] {
			found = found || r == s.text
		}
		if !found {
			t.Errorf("the Go snippet of %s is no example's region: mark one with // snippet: %s\n%s", s.where, s.where, s.text)
		}
	}
	if seen["README.md"] == 0 || seen["resil/doc.go"] == 0 {
		t.Fatalf("found snippets in %v: the README and resil/doc.go have one each at least", seen)
	}
}
