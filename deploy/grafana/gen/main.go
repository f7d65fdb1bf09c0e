// Command gen writes retrystorm's Grafana dashboard (package grafana) to
// the file named by its argument. go generate runs it in deploy/grafana.
package main

import (
	"fmt"
	"os"

	"github.com/retrystorm/retrystorm/deploy/grafana"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen FILE.json")
		os.Exit(2)
	}
	b, err := grafana.JSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
