//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package cli

import "os"

// terminalColumns returns 0: off Unix, the width comes from COLUMNS or is
// 80.
func terminalColumns(*os.File) int { return 0 }
