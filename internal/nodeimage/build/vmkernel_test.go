package build

import (
	"archive/tar"
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
)

// vmDisk returns an output disk as vminit.sh leaves it: the result line, the
// log at 4 KiB, the tar at 64 MiB.
func vmDisk(line, log string, tarData []byte) memDisk {
	d := make([]byte, vmTarOffset+len(tarData)+1<<20)
	copy(d, line)
	copy(d[vmLogOffset:], log)
	copy(d[vmTarOffset:], tarData)
	return memDisk(d)
}

// memDisk is a drivers.OutputDisk in memory.
type memDisk []byte

func (m memDisk) CopyRange(w io.Writer, off, n int64) error {
	if off+n > int64(len(m)) {
		return io.ErrUnexpectedEOF
	}
	_, err := w.Write(m[off : off+n])
	return err
}

func TestReadVMResult(t *testing.T) {
	root := writeTestTar(t, []tarEntry{{name: "etc/", typ: tar.TypeDir}, {name: "etc/motd", typ: tar.TypeReg, data: "hi\n"}})
	for _, c := range []struct {
		name, line, log string
		tar             []byte
		want            string // in the error; "" is success
	}{
		{"success", "hwk-stage2 exit=0 log=9 tar=" + strconv.Itoa(len(root)) + "\n", "dpkg ran\n", root, ""},
		{"script failed", "hwk-stage2 exit=3 log=15 tar=0\n", "dpkg-said-this\n", nil, "stage2.sh exited with 3:\ndpkg-said-this"},
		{"no result", "", "", nil, "the VM powered off without writing a result"},
		{"log too long", "hwk-stage2 exit=0 log=99999999 tar=0\n", "", nil, "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log, out bytes.Buffer
			err := readVMResult(vmDisk(c.line, c.log, c.tar), &log, &out)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), root) {
					t.Errorf("the root read back is %d bytes, want the %d the guest wrote", out.Len(), len(root))
				}
			} else if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if log.String() != c.log {
				t.Errorf("log = %q, want %q", log.String(), c.log)
			}
		})
	}
}
