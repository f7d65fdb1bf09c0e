package configcmd

import (
	"bytes"
	"context"
	"testing"
)

// TestChainsFailInOrder: with two chains checked at a time, the error is
// the first chain's in their order, as when they ran one after another
// (--workers 1), not whichever failed first in time: a chain that fails
// stops only the chains after it. Here every chain's runs need more
// memory than --max-memory gives, the later chains more.
func TestChainsFailInOrder(t *testing.T) {
	dir := t.TempDir()
	writeServices(t, dir, 6, func(i int) servicePolicy {
		return servicePolicy{attempts: 1 + i%3, maxAttempts: 2 + i/3}
	})
	run := func(workers int) string {
		var out, errOut bytes.Buffer
		err := RunCheck(context.Background(), nil, CheckOptions{JSON: true, Seeds: 1, Workers: workers, MaxMemory: 6 << 20,
			Base: "testdata/stack/short-base.yaml", CI: CI{Manifests: dir}}, IO{Stdout: &out, Stderr: &errOut})
		if err == nil {
			t.Fatalf("--workers %d: no error with --max-memory 6MiB", workers)
		}
		return err.Error()
	}
	want := run(1)
	for range 10 {
		if got := run(2); got != want {
			t.Errorf("two chains at a time: %q; one at a time: %q", got, want)
		}
	}
}
