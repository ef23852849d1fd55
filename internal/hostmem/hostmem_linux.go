package hostmem

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

func read() (uint64, uint64, error) { return meminfo("/proc/meminfo") }

// meminfo returns MemTotal and MemAvailable, in bytes, from a file in
// /proc/meminfo's format (proc(5)), which gives them in kiB.
func meminfo(path string) (total, avail uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		n, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			total = n << 10
		case "MemAvailable:":
			avail = n << 10
		}
	}
	if total == 0 {
		return 0, 0, errors.New(path + " has no MemTotal")
	}
	return total, avail, sc.Err()
}
