package wasm

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms wasmplane runs on.
const hugePage = 2 << 20

// codeMappings returns the process's anonymous executable mappings, start to end: in a
// wasmplane process they are the machine code wazero compiled from modules (Go's own code
// is mapped from the binary's file). Nil if /proc cannot be read.
func codeMappings() map[uintptr]uintptr {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[uintptr]uintptr{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "start-end perms offset dev inode [path]"; an anonymous mapping has no path.
		fields := bytes.Fields(sc.Bytes())
		if len(fields) != 5 || string(fields[1]) != "r-xp" {
			continue
		}
		lo, hi, ok := bytes.Cut(fields[0], []byte{'-'})
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 == nil && err2 == nil {
			out[uintptr(start)] = uintptr(end)
		}
	}
	return out
}

// backNewCodeWithHugePages moves the machine code mapped since before (codeMappings) onto
// transparent huge pages, where whole 2 MiB stretches of it lie. A validating call comes
// after a create's other work has evicted the guest from the CPU's caches and TLBs, and
// on a virtual machine each TLB miss is a two-level page walk: a standard-Go guest's
// ≈ 13 MB of code on 4 KiB pages cost a cold call ≈ 10 µs more than on huge pages
// (BenchmarkValidateShares). Best effort: a kernel without MADV_COLLAPSE (before Linux
// 6.1) or without transparent huge pages leaves the code as it is.
func backNewCodeWithHugePages(before map[uintptr]uintptr) {
	if before == nil {
		return
	}
	for start, end := range codeMappings() {
		if _, old := before[start]; old {
			continue
		}
		lo, hi := (start+hugePage-1)&^(hugePage-1), end&^(hugePage-1)
		if hi <= lo {
			continue // smaller than a huge page: the module's code is small anyway
		}
		// The range is an address, not Go memory: madvise is called on it directly.
		for _, advice := range [...]uintptr{unix.MADV_HUGEPAGE, unix.MADV_COLLAPSE} {
			_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, advice)
		}
	}
}
