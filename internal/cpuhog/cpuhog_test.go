package cpuhog

import (
	"os"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// TestStart: a hog starts spinning, and is gone once its test ends; the
// test's own process, not a hog, passes through Main.
func TestStart(t *testing.T) {
	if Active() {
		t.Fatal("the test's own process is a hog")
	}
	var pid int
	t.Run("hog", func(t *testing.T) { pid = Start(t) })
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here to look for the hog in")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
		t.Errorf("the hog, process %d, outlived its test: %v", pid, err)
	}
}
