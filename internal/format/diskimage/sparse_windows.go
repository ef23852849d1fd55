package diskimage

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// makeSparse marks f sparse. NTFS otherwise keeps a file's unwritten
// tail as a promise of zeros only up to the last byte written: the backup
// GPT, written first at the disk's end, would make it write out the whole
// disk (20 GiB) in zeros.
func makeSparse(f *os.File) error {
	var n uint32
	if err := windows.DeviceIoControl(windows.Handle(f.Fd()), windows.FSCTL_SET_SPARSE, nil, 0, nil, 0, &n, nil); err != nil {
		return fmt.Errorf("mark %s sparse (FSCTL_SET_SPARSE; is it on NTFS or ReFS?): %w", f.Name(), err)
	}
	return nil
}
