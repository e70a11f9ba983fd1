// Command sleeper sleeps for its first argument (a Go duration or whole seconds) and exits
// 0; without a usable argument it sleeps forever, like `sleep infinity` or `top`.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		d, err := time.ParseDuration(os.Args[1])
		if err != nil {
			if n, nerr := strconv.Atoi(os.Args[1]); nerr == nil {
				d, err = time.Duration(n)*time.Second, nil
			}
		}
		if err == nil {
			time.Sleep(d)
			fmt.Println("sleeper: done")
			return
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}
