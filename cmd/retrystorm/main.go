// Command retrystorm shows a retry storm, measures what each defence costs,
// and checks its own claims. See doc.go for the manual.
package main

import (
	"os"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
)

func main() {
	// The zero cli.Heavy: the heavy commands run in retrystorm-full.
	os.Exit(cli.Launch(cli.Heavy{}))
}
