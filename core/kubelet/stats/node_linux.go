package stats

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/stat's CPU times: USER_HZ, 100 on every Linux ABI Go
// supports.
const userHZ = 100

// ReadNode reads the machine's CPU time and memory from /proc, as the kubelet reads its
// root cgroup: CPU is every non-idle jiffy, the working set is memory not available to
// new allocations (MemTotal − MemAvailable).
func ReadNode() (NodeUsage, bool) {
	u := NodeUsage{Time: time.Now()}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return u, false
	}
	cpu, boot, ok := parseProcStat(stat)
	if !ok {
		return u, false
	}
	u.CPUNanoSeconds, u.BootTime = cpu, boot
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return u, false
	}
	total, avail, ok := parseMeminfo(mem)
	if !ok {
		return u, false
	}
	u.WorkingSetBytes, u.UsageBytes, u.AvailableBytes = total-avail, total-avail, avail
	return u, true
}

// parseProcStat returns the non-idle CPU time of all CPUs and the boot time.
func parseProcStat(b []byte) (cpuNanos uint64, boot time.Time, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var gotCPU bool
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 5 && f[0] == "cpu":
			// user nice system idle iowait irq softirq steal guest guest_nice; guest time
			// is already in user, and idle and iowait are not use.
			var jiffies uint64
			for i, v := range f[1:] {
				if i == 3 || i == 4 || i >= 8 {
					continue
				}
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, boot, false
				}
				jiffies += n
			}
			cpuNanos, gotCPU = jiffies*uint64(time.Second/userHZ), true
		case len(f) == 2 && f[0] == "btime":
			if s, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				boot = time.Unix(s, 0)
			}
		}
	}
	return cpuNanos, boot, gotCPU
}

// parseMeminfo returns MemTotal and MemAvailable in bytes.
func parseMeminfo(b []byte) (total, avail uint64, ok bool) {
	var gotTotal, gotAvail bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total, gotTotal = n<<10, true
		case "MemAvailable:":
			avail, gotAvail = n<<10, true
		}
	}
	return total, avail, gotTotal && gotAvail && avail <= total
}
