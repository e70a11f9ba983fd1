// Command init-setup is an init container: it prints what it prepares and exits 0 quickly.
// When its first argument is a path it writes "ready" there (e.g. on a shared volume).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("init-setup: preparing")
	if len(os.Args) > 1 {
		if err := os.WriteFile(os.Args[1], []byte("ready\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "init-setup: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("init-setup: wrote %s\n", os.Args[1])
	}
	fmt.Println("init-setup: done")
}
