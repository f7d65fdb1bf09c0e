package cli

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

func runVersion(_ context.Context, inv *Invocation) error {
	if err := inv.NoArgs(); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo()
	_, err := fmt.Fprint(inv.Stdout, versionText(info, runtime.GOOS+"/"+runtime.GOARCH))
	return err
}

// pseudoRev is the revision at the end of a pseudo-version
// (v0.0.0-20261130212900-0123456789ab), as go install of a commit records
// it.
var pseudoRev = regexp.MustCompile(`-(?:0\.)?\d{14}-([0-9a-f]{12})(?:\+.*)?$`)

// versionText says which retrystorm this is, from its build information:
// the module version (a tag such as v1.2.0 when installed with go install
// …@version, "(devel)" when built by go run or without version control),
// the revision and its time when the go command recorded them, and the
// toolchain.
func versionText(info *debug.BuildInfo, platform string) string {
	if info == nil {
		return "retrystorm: no build information in this binary\n"
	}
	var b strings.Builder
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	fmt.Fprintf(&b, "retrystorm %s\n", version)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	switch rev := settings["vcs.revision"]; {
	case rev != "":
		b.WriteString("revision: " + rev)
		if t := settings["vcs.time"]; t != "" {
			b.WriteString(" (" + t + ")")
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteByte('\n')
	case pseudoRev.MatchString(version):
		fmt.Fprintf(&b, "revision: %s (from the pseudo-version)\n", pseudoRev.FindStringSubmatch(version)[1])
	case version == "(devel)":
		b.WriteString("revision: unknown (go run, or go build -buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "go: %s %s\n", info.GoVersion, platform)
	return b.String()
}
