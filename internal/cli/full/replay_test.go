package full

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReplayCommand: the captured lab storm replays (exit 0: the replay
// agrees with the window), its JSON carries the verdicts; a steady window
// says there is no incident and exits 0; what cannot be replayed is exit
// 2 with a message.
func TestReplayCommand(t *testing.T) {
	r := runCLI(t, "replay", "--file", "../../../replay/testdata/storm.json", "--json")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	var got struct {
		Incident bool `json:"incident"`
		Trigger  struct {
			Kind string `json:"kind"`
		} `json:"trigger"`
		Agrees   bool   `json:"agrees"`
		Prevents string `json:"prevents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Incident || got.Trigger.Kind != "capacity" || !got.Agrees || got.Prevents == "" {
		t.Errorf("replay JSON %+v", got)
	}
	r = runCLI(t, "replay", "--file", "../../../calibrate/testdata/haproxy.json", "--out", t.TempDir())
	if r.code != 0 || !strings.Contains(r.stdout, "no incident in the window") {
		t.Errorf("a steady window: exit %d, %q", r.code, r.stdout)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "replay needs --prometheus URL or --file FILE"},
		{[]string{"replay", "x.json"}, "takes no arguments"},
		{[]string{"replay", "--prometheus", "http://127.0.0.1:1", "--timeout", "2s"}, "cannot read from Prometheus at http://127.0.0.1:1"},
		{[]string{"replay", "--file", "../../../calibrate/testdata/lab.json"}, "at least 20 are needed"},
	} {
		r := runCLI(t, c.args...)
		msg := strings.Join(strings.Fields(r.stderr), " ")
		if r.code != 2 || !strings.Contains(msg, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
}
