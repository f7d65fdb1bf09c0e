package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	setting := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}},
			"retrystorm v1.2.0\ngo: go1.26.8 linux/amd64\n"},
		{"go install of a commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261130212900-0123456789ab"}},
			"retrystorm v0.0.0-20261130212900-0123456789ab\nrevision: 0123456789ab (from the pseudo-version)\ngo: go1.26.8 linux/amd64\n"},
		{"go build in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.1-0.20261130212900-0123456789ab+dirty"},
			Settings: setting("vcs", "git", "vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.time", "2026-11-30T21:29:00Z", "vcs.modified", "true")},
			"retrystorm v1.2.1-0.20261130212900-0123456789ab+dirty\nrevision: 0123456789abcdef0123456789abcdef01234567 (2026-11-30T21:29:00Z), with uncommitted changes\ngo: go1.26.8 linux/amd64\n"},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"retrystorm (devel)\nrevision: unknown (go run, or go build -buildvcs=false)\ngo: go1.26.8 linux/amd64\n"},
		{"no information", nil, "retrystorm: no build information in this binary\n"},
	} {
		if got := versionText(c.info, "linux/amd64"); got != c.want {
			t.Errorf("%s:\ngot  %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	r := runCLI(t, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "retrystorm ") || !strings.Contains(r.stdout, "\ngo: go1.") {
		t.Errorf("exit %d: %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "version", "extra"); r.code != 2 {
		t.Errorf("version extra: exit %d, want 2", r.code)
	}
}
