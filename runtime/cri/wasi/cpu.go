package wasi

import "sync/atomic"

// cpuClock accounts a guest's CPU time. The guest's goroutine is locked to its OS thread
// for the guest's whole life, so the thread's CPU clock is the guest's usage (host calls
// the guest makes, such as WASI reads and writes, included, as a process's system time is
// counted for a container). When the guest returns, the thread's final figure is kept,
// because the thread ends with the goroutine.
//
// The thread is one of the Go runtime's, which may have run other goroutines before: its
// clock when the guest starts is the base subtracted from every reading.
type cpuClock struct {
	base  atomic.Uint64 // the thread's CPU time when the guest started
	tid   atomic.Int64  // the guest's thread while it runs; 0 before and after
	final atomic.Uint64 // nanoseconds, set when the guest returns
}

// start records the calling thread as the guest's; the caller has locked it.
func (c *cpuClock) start() {
	c.base.Store(ownThreadCPU())
	c.tid.Store(int64(currentThread()))
}

// stop keeps the guest's final CPU time; it runs on the guest's thread.
func (c *cpuClock) stop() {
	c.final.Store(ownThreadCPU() - c.base.Load())
	c.tid.Store(0)
}

// usage is the guest's cumulative CPU time in nanoseconds.
func (c *cpuClock) usage() uint64 {
	if !cpuAccounting {
		return 0
	}
	if tid := c.tid.Load(); tid != 0 {
		if ns, ok := threadCPU(int(tid)); ok && c.tid.Load() == tid {
			return ns - c.base.Load()
		}
	}
	return c.final.Load()
}
