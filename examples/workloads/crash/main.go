// Command crash prints a message on stderr and exits 1, for CrashLoopBackOff demos.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "crash: something went wrong, exiting 1")
	os.Exit(1)
}
