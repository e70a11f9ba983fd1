package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
)

// sigquitDumpHeader starts each dump, so that it can be found in a log.
const sigquitDumpHeader = "\n=== goroutine dump on SIGQUIT (the process keeps running) ===\n"

// dumpGoroutinesOnSIGQUIT writes every goroutine's stack to w (the goroutine profile at
// debug level 2, what Go's own SIGQUIT handler prints) each time the process receives
// SIGQUIT, and keeps running: Go's default handler exits, and its traceback of a
// goroutine that runs guest machine code is what crashed the process. The returned stop
// restores the default and waits for a dump in progress.
func dumpGoroutinesOnSIGQUIT(w io.Writer, log *slog.Logger) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGQUIT)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-sigs:
				log.Warn("SIGQUIT: writing a goroutine dump and carrying on")
				_, _ = io.WriteString(w, sigquitDumpHeader)
				if err := pprof.Lookup("goroutine").WriteTo(w, 2); err != nil {
					log.Error("goroutine dump", "err", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}
