package wasi

import "golang.org/x/sys/unix"

// cpuAccounting tells that guests' CPU time is measured.
const cpuAccounting = true

// currentThread is the calling thread's id.
func currentThread() int { return unix.Gettid() }

// ownThreadCPU is the calling thread's CPU time in nanoseconds.
func ownThreadCPU() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// threadCPU reads another thread's CPU clock in nanoseconds: Linux names a thread's
// scheduler clock by its id (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in the kernel's
// posix-timers.h), readable by any thread of the same process.
func threadCPU(tid int) (uint64, bool) {
	const cpuclockSched, cpuclockPerThread = 2, 4
	clock := int32(^uint32(tid)<<3) | cpuclockPerThread | cpuclockSched
	var ts unix.Timespec
	if unix.ClockGettime(clock, &ts) != nil {
		return 0, false
	}
	return uint64(ts.Nano()), true
}
