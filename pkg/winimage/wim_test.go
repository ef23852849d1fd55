package winimage

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf16"
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
