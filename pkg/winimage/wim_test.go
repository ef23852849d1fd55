package winimage

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/pkg/isoimage"
)

// wim crafts an install.wim: the 208-byte header with the XML resource
// header filled in, some stand-in image data, then the UTF-16 list.
func wim(t *testing.T, xmlText string) []byte {
	t.Helper()
	u := utf16.Encode([]rune("\ufeff" + xmlText))
	list := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(list[2*i:], c)
	}
	head := make([]byte, wimHeaderSize)
	copy(head, wimMagic)
	binary.LittleEndian.PutUint32(head[8:], wimHeaderSize)
	offset := uint64(wimHeaderSize + 4096)
	var size [8]byte
	binary.LittleEndian.PutUint64(size[:], uint64(len(list)))
	copy(head[wimXMLHeader:wimXMLHeader+7], size[:7])
	binary.LittleEndian.PutUint64(head[wimXMLHeader+8:], offset)
	binary.LittleEndian.PutUint64(head[wimXMLHeader+16:], uint64(len(list)))
	return append(append(head, bytes.Repeat([]byte{0xAB}, 4096)...), list...)
}

const server2022List = `<WIM><TOTALBYTES>5000000000</TOTALBYTES>
<IMAGE INDEX="1"><NAME>Windows Server 2022 Standard Evaluation</NAME><DESCRIPTION>Server Core</DESCRIPTION><WINDOWS><VERSION><MAJOR>10</MAJOR><MINOR>0</MINOR><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="2"><NAME>Windows Server 2022 Standard Evaluation (Desktop Experience)</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="3"><NAME>Windows Server 2022 Datacenter Evaluation</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="4"><NAME>Windows Server 2022 Datacenter Evaluation (Desktop Experience)</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
</WIM>`

func TestEditions(t *testing.T) {
	eds, err := Editions(bytes.NewReader(wim(t, server2022List)))
	if err != nil {
		t.Fatal(err)
	}
	if len(eds) != 4 || eds[2].Index != 3 || eds[2].Name != "Windows Server 2022 Datacenter Evaluation" || eds[2].Build != 20348 || eds[0].Description != "Server Core" {
		t.Fatalf("editions = %+v", eds)
	}
	if !eds[2].ServerCore() || eds[3].ServerCore() {
		t.Error("Server Core vs Desktop Experience")
	}

	got, err := ChooseEdition(eds, "2022", "")
	if err != nil || got.Index != 3 {
		t.Errorf("default edition = %+v, %v; want Datacenter Server Core (3)", got, err)
	}
	got, err = ChooseEdition(eds, "2022", "windows server 2022 standard evaluation (desktop experience)")
	if err != nil || got.Index != 2 {
		t.Errorf("named edition = %+v, %v", got, err)
	}
	if _, err := ChooseEdition(eds, "2025", ""); err == nil || !strings.Contains(err.Error(), "no Windows Server 2025 (build 26100) Datacenter Server Core edition") || !strings.Contains(err.Error(), `"Windows Server 2022 Datacenter Evaluation" (build 20348)`) {
		t.Errorf("a 2022 ISO for 2025: %v", err)
	}
	if _, err := ChooseEdition(eds, "2022", "Windows Server 2022 Datacenter"); err == nil || !strings.Contains(err.Error(), `no edition "Windows Server 2022 Datacenter"; it has`) {
		t.Errorf("unknown edition: %v", err)
	}
	if _, err := ChooseEdition(eds, "2025", "Windows Server 2022 Datacenter Evaluation"); err == nil || !strings.Contains(err.Error(), "is build 20348, not Windows Server 2025") {
		t.Errorf("named edition of the wrong build: %v", err)
	}
}

func TestEditionsRefusesOtherFiles(t *testing.T) {
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"esd":       {append([]byte("ESD\x00"), make([]byte, 300)...), "not a WIM"},
		"short":     {[]byte("MSWIM"), "read the header"},
		"text":      {bytes.Repeat([]byte("x"), 400), "not a WIM file"},
		"no images": {wim(t, "<WIM></WIM>"), "lists no images"},
		"bad xml":   {wim(t, "<WIM><IMAGE>"), "the image list"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Editions(bytes.NewReader(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// isoWith writes an ISO the way Windows media are made (UDF bridge) with
// genisoimage, holding files.
func isoWith(t *testing.T, files map[string][]byte) string {
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

func TestISOEditions(t *testing.T) {
	iso := isoWith(t, map[string][]byte{"README.TXT": []byte("UDF"), "SOURCES/INSTALL.WIM": wim(t, server2022List), "setup.exe": {1}})
	eds, err := ISOEditions(iso)
	if err != nil {
		t.Fatal(err)
	}
	if len(eds) != 4 || eds[2].Name != "Windows Server 2022 Datacenter Evaluation" {
		t.Errorf("editions = %+v", eds)
	}

	esd := isoWith(t, map[string][]byte{"sources/install.esd": []byte("ESD")})
	if _, err := ISOEditions(esd); err == nil || !strings.Contains(err.Error(), "has no sources/install.wim (it has sources/install.esd") {
		t.Errorf("an ESD ISO: %v", err)
	}
	notWin := filepath.Join(t.TempDir(), "x.iso")
	if err := isoimage.Write(notWin, "cidata", []isoimage.File{{Name: "meta-data", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ISOEditions(notWin); err == nil || !strings.Contains(err.Error(), "is not Windows installation media") {
		t.Errorf("a non-UDF ISO: %v", err)
	}
	if _, err := ISOEditions(filepath.Join(t.TempDir(), "missing.iso")); err == nil || !strings.Contains(err.Error(), "--iso") {
		t.Errorf("a missing ISO: %v", err)
	}
}
