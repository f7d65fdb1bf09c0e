// Command retrystorm shows a retry storm, measures what each defence costs,
// and checks its own claims. See doc.go for the manual.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/retrystorm/retrystorm/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The zero cli.Heavy: the heavy commands run in retrystorm-full.
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, cli.Heavy{})
	stop()
	os.Exit(code)
}
