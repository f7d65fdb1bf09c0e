package importer_test

import (
	"fmt"

	"github.com/retrystorm/retrystorm/importer"
)

// The policies an AWS shared config file can write for its default
// profile, each written into the file and read back; the edit of one of
// them as a diff that patch -p0 applies.
func ExampleWritable() {
	srcs := []importer.Source{{Name: "config", Data: []byte("[default]\nregion = us-east-1\nretry_mode = standard\nmax_attempts = 3\n")}}
	fleets, err := importer.Import(srcs, importer.Options{})
	if err != nil {
		panic(err)
	}
	cands, err := importer.Writable(srcs, fleets[0], importer.WritableOptions{})
	if err != nil {
		panic(err)
	}
	for _, c := range cands {
		fmt.Printf("%s: %d retries, budget %s\n", c.Name, c.Fleet.Fleet.Retry.MaxRetries, c.Fleet.Fleet.Budget.Use)
	}
	fmt.Print(cands[len(cands)-1].Edited[0].Diff)
	// Output:
	// as your files say: 2 retries, budget aws
	// max_attempts 1: 0 retries, budget none
	// max_attempts 2: 1 retries, budget aws
	// max_attempts 4: 3 retries, budget aws
	// max_attempts 5: 4 retries, budget aws
	// retry_mode adaptive: 2 retries, budget aws_adaptive
	// retry_mode adaptive, max_attempts 2: 1 retries, budget aws_adaptive
	// retry_mode adaptive, max_attempts 4: 3 retries, budget aws_adaptive
	// retry_mode adaptive, max_attempts 5: 4 retries, budget aws_adaptive
	// --- config
	// +++ config (advised)
	// @@ -1,4 +1,4 @@
	//  [default]
	//  region = us-east-1
	// -retry_mode = standard
	// -max_attempts = 3
	// +retry_mode = adaptive
	// +max_attempts = 5
}
