// Command counter prints an increasing number every interval (first argument, a Go
// duration; default 100ms) forever. It handles nothing: only a kill stops it.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	interval := 100 * time.Millisecond
	if len(os.Args) > 1 {
		if d, err := time.ParseDuration(os.Args[1]); err == nil && d > 0 {
			interval = d
		}
	}
	for i := 0; ; i++ {
		fmt.Printf("count %d\n", i)
		time.Sleep(interval)
	}
}
