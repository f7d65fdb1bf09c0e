// Command genassets builds the page's WebAssembly module and writes it,
// with wasm_exec.js and the toolchain's version, into page/assets for the
// retrystorm binary to embed.
// `go generate ./page` runs it in the page directory.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/retrystorm/retrystorm/page"
)

func main() {
	a, err := page.BuildAssets(context.Background(), ".")
	if err == nil {
		err = page.WriteAssets(page.AssetsDir, a)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genassets:", err)
		os.Exit(1)
	}
	fmt.Printf("genassets: wrote %s/%s (%d bytes), %s/%s and %s/%s (%s)\n", page.AssetsDir, page.ModuleFile, len(a.Module), page.AssetsDir, page.WasmExecFile, page.AssetsDir, page.ToolchainFile, a.Toolchain)
}
