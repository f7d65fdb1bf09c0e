//go:build unix

package testlock

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestExclusiveWaitsForShared holds the lock shared here and checks that a
// child process asking for it exclusively waits until it is let go.
func TestExclusiveWaitsForShared(t *testing.T) {
	// A lock file of the test's own, so that the other test binaries of
	// the repository, running beside this one, do not take part.
	if p := os.Getenv("TESTLOCK_PATH"); p != "" {
		path = func() string { return p }
		Exclusive()
		return
	}
	own := filepath.Join(t.TempDir(), "lock")
	f, err := os.OpenFile(own, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock(f, false); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestExclusiveWaitsForShared$")
	cmd.Env = append(os.Environ(), "TESTLOCK_PATH="+own)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		t.Fatal("the exclusive lock was taken while a shared one was held")
	case <-time.After(300 * time.Millisecond):
	}
	f.Close() // releases the shared lock
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the exclusive lock was not taken after the shared one was released")
	}
}

// TestHoldTwice: a process that takes the lock twice (a test that takes
// it, run with -count 2) goes on; it waited for itself forever before.
func TestHoldTwice(t *testing.T) {
	old, oldHeld, oldExcl := path, held, heldExclusive
	t.Cleanup(func() { path, held, heldExclusive = old, oldHeld, oldExcl })
	own := filepath.Join(t.TempDir(), "lock")
	path = func() string { return own }
	held, heldExclusive = nil, false
	done := make(chan struct{})
	go func() {
		defer close(done)
		Shared()
		Exclusive()
		Exclusive()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("taking the lock twice in one process blocked")
	}
	if held == nil || !heldExclusive {
		t.Errorf("held %v, exclusive %v; want the lock held exclusively", held != nil, heldExclusive)
	}
	held.Close()
}

// TestAloneIsExclusiveForTheTest holds the lock shared, makes it exclusive
// for a subtest with Alone, and checks that a child process asking for it
// shared waits until the subtest is over, and no longer.
func TestAloneIsExclusiveForTheTest(t *testing.T) {
	if p := os.Getenv("TESTLOCK_SHARED_PATH"); p != "" {
		path = func() string { return p }
		Shared()
		return
	}
	own := filepath.Join(t.TempDir(), "lock")
	oldPath := path
	path = func() string { return own }
	t.Cleanup(func() {
		mu.Lock()
		if held != nil {
			held.Close()
		}
		held, heldExclusive = nil, false
		mu.Unlock()
		path = oldPath
	})
	Shared()
	child := func() chan error {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestAloneIsExclusiveForTheTest$")
		cmd.Env = append(os.Environ(), "TESTLOCK_SHARED_PATH="+own)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return done
	}
	var waiting chan error
	t.Run("alone", func(t *testing.T) {
		Alone(t)
		waiting = child()
		select {
		case <-waiting:
			t.Fatal("a shared lock was taken while a test held it alone")
		case <-time.After(300 * time.Millisecond):
		}
	})
	select {
	case err := <-waiting:
		if err != nil {
			t.Fatalf("the child: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock stayed exclusive after the test that held it alone")
	}
}
