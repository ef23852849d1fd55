// Package winimagetest makes stand-ins for a Windows ISO's parts in tests:
// an install.wim with a given image list, and the ISO around it.
package winimagetest

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// Server2022List is the image list of a Windows Server 2022 evaluation
// ISO (the names and builds Microsoft's media carry).
const Server2022List = `<WIM><TOTALBYTES>5000000000</TOTALBYTES>
<IMAGE INDEX="1"><NAME>Windows Server 2022 Standard Evaluation</NAME><DESCRIPTION>Server Core</DESCRIPTION><WINDOWS><VERSION><MAJOR>10</MAJOR><MINOR>0</MINOR><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="2"><NAME>Windows Server 2022 Standard Evaluation (Desktop Experience)</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="3"><NAME>Windows Server 2022 Datacenter Evaluation</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="4"><NAME>Windows Server 2022 Datacenter Evaluation (Desktop Experience)</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
</WIM>`

// WIM crafts an install.wim: the 208-byte header (wimlib's and
// Microsoft's layout) with the XML resource header at offset 72 filled
// in, stand-in image data, then the UTF-16 image list.
func WIM(xmlText string) []byte {
	const headerSize, xmlHeader = 208, 72
	u := utf16.Encode([]rune("\ufeff" + xmlText))
	list := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(list[2*i:], c)
	}
	head := make([]byte, headerSize)
	copy(head, "MSWIM\x00\x00\x00")
	binary.LittleEndian.PutUint32(head[8:], headerSize)
	offset := uint64(headerSize + 4096)
	var size [8]byte
	binary.LittleEndian.PutUint64(size[:], uint64(len(list)))
	copy(head[xmlHeader:xmlHeader+7], size[:7])
	binary.LittleEndian.PutUint64(head[xmlHeader+8:], offset)
	binary.LittleEndian.PutUint64(head[xmlHeader+16:], uint64(len(list)))
	return append(append(head, bytes.Repeat([]byte{0xAB}, 4096)...), list...)
}

// ISO writes an ISO shaped like Windows media (a UDF bridge disc) holding
// files, with Debian's genisoimage. Without genisoimage the test is
// skipped, or fails when HWK_REQUIRE_GENISOIMAGE is set (CI).
func ISO(t testing.TB, files map[string][]byte) string {
	t.Helper()
	if _, err := exec.LookPath("genisoimage"); err != nil {
		if os.Getenv("HWK_REQUIRE_GENISOIMAGE") != "" {
			t.Fatal("genisoimage is required (Debian: apt-get install genisoimage)")
		}
		t.Skip("no genisoimage")
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	for name, data := range files {
		p := filepath.Join(tree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	iso := filepath.Join(dir, "server.iso")
	if out, err := exec.Command("genisoimage", "-quiet", "-udf", "-iso-level", "3", "-J", "-o", iso, tree).CombinedOutput(); err != nil {
		t.Fatalf("genisoimage: %v\n%s", err, out)
	}
	return iso
}
