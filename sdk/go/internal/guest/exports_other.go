//go:build !wasip1

package guest

import (
	"fmt"
	"os"
)

// Log writes to stderr when the SDK is used outside WebAssembly (unit tests).
func Log(level int, msg string) { fmt.Fprintf(os.Stderr, "plugin log %d: %s\n", level, msg) }
