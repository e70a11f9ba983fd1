//go:build !linux

package wasi

// cpuAccounting is false: elsewhere no per-thread CPU clock is read, and guests report
// no CPU usage.
const cpuAccounting = false

func currentThread() int           { return 0 }
func ownThreadCPU() uint64         { return 0 }
func threadCPU(int) (uint64, bool) { return 0, false }
