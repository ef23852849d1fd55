package nodeimage

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// removeWork removes a build's work directory, first unmounting what is
// mounted under it. debootstrap mounts /proc and /sys in the root it makes
// (and, in a container, binds the host's /dev/pts and /dev/shm there), and
// leaves them mounted when it is killed, as a cancelled build kills it.
// os.RemoveAll would then walk into them, and through a bind mount delete
// the host's own files. A mount that will not go makes removeWork leave
// the whole directory and say so.
func removeWork(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	// Deepest first, so that a mount inside another comes off before it.
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		// MNT_DETACH: a process still holding a file there (the killed
		// debootstrap's children) does not keep the mount in the tree.
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
			return fmt.Errorf("unmount %s (left mounted by debootstrap) before removing %s: %w; unmount it by hand, then remove the directory", m, dir, err)
		}
	}
	if left, err := mountsUnder(dir); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("%s still has %s mounted in it, so it was left in place: unmount them by hand, then remove the directory", dir, strings.Join(left, ", "))
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists the mount points below dir, from this process's view
// of the mount table (proc(5), /proc/self/mountinfo).
func mountsUnder(dir string) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	// The table names mount points by their real path.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if strings.HasPrefix(mp, abs+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
