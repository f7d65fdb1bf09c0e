package cli

import (
	"strings"
	"testing"
)

// TestCommandLineHidesSecrets: the command line a report shows (replay's)
// says the flags given, but not a password in --prometheus's URL nor a
// --header's value; the files of the credentials are inputs, which no
// output may overwrite.
func TestCommandLineHidesSecrets(t *testing.T) {
	for _, name := range []string{"calibrate", "replay", "check"} {
		c, _ := lookup(table(Heavy{}), name)
		inv := &Invocation{Name: name, typed: true}
		args := []string{"--prometheus", "https://reader:pa55-w0rd@prom.example:9090", "--header", "X-Api-Key: k3y-v4lue",
			"--bearer-token-file", "token", "--ca-file", "ca.pem", "--http-config", "http.yml", "--basic-auth-password-file", "pw"}
		if err := parse(c, args, inv); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		line := inv.commandText()
		if strings.Contains(line, "pa55-w0rd") || strings.Contains(line, "k3y-v4lue") || !strings.Contains(line, "--header X-Api-Key: …") ||
			!strings.Contains(line, "https://reader:xxxxx@prom.example:9090") {
			t.Errorf("%s: the command line is %q", name, line)
		}
		in := strings.Join(inv.Inputs(), " ")
		for _, f := range []string{"token", "ca.pem", "http.yml", "pw"} {
			if !strings.Contains(" "+in+" ", " "+f+" ") {
				t.Errorf("%s: the inputs %q lack %s", name, in, f)
			}
		}
	}
}
