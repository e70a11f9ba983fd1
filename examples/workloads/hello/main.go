// Command hello prints a greeting, its arguments and $GREETING, then exits 0.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	fmt.Println("hello from wasmplane")
	if len(os.Args) > 1 {
		fmt.Printf("args: %s\n", strings.Join(os.Args[1:], " "))
	}
	if g := os.Getenv("GREETING"); g != "" {
		fmt.Printf("greeting: %s\n", g)
	}
	fmt.Fprintln(os.Stderr, "hello on stderr")
}
