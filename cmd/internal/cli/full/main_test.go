package full

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/internal/cpuhog"
	"github.com/retrystorm/retrystorm/internal/testlock"
)

// TestMain keeps these CPU-heavy tests from running beside the lab's, which
// time real servers (see internal/testlock); a process of busy loops for
// a test (cpuhog.Start) goes no further than cpuhog.Main.
func TestMain(m *testing.M) {
	cpuhog.Main()
	testlock.RunShared(m)
}

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the full command, as retrystorm-full does (internal/cli's
// twin runs the light one; see there why there are two).
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, &out, &errb, Heavy)
	return result{code, out.String(), errb.String()}
}

// TestEveryHeavyCommandIsHere: retrystorm-full has a run function for every
// heavy command of the table, so that the light retrystorm never hands a
// command to a companion that lacks it.
func TestEveryHeavyCommandIsHere(t *testing.T) {
	v := reflect.ValueOf(Heavy)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("full.Heavy.%s is not set", v.Type().Field(i).Name)
		}
	}
}
