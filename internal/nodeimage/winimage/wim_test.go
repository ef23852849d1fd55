package winimage

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwk-dev/hwk/internal/format/isoimage"
	"github.com/hwk-dev/hwk/internal/testing/winimagetest"
)

func wim(t *testing.T, xmlText string) []byte { return winimagetest.WIM(xmlText) }

var server2022List = winimagetest.Server2022List

func TestEditions(t *testing.T) {
	eds, err := Editions(bytes.NewReader(wim(t, server2022List)))
	if err != nil {
		t.Fatal(err)
	}
	if len(eds) != 4 || eds[2].Index != 3 || eds[2].Name != "Windows Server 2022 SERVERDATACENTERCORE" || eds[2].Build != 20348 ||
		eds[2].DisplayName != "Windows Server 2022 Datacenter Evaluation" || eds[2].EditionID != "ServerDatacenterEval" || eds[2].Language != "en-US" {
		t.Fatalf("editions = %+v", eds)
	}
	if !eds[2].ServerCore() || eds[3].ServerCore() {
		t.Error("Server Core vs Desktop Experience")
	}

	got, err := ChooseEdition(eds, "2022", "")
	if err != nil || got.Index != 3 {
		t.Errorf("default edition = %+v, %v; want Datacenter Server Core (3)", got, err)
	}
	// By its name, or by what DISM shows.
	got, err = ChooseEdition(eds, "2022", "windows server 2022 standard evaluation (desktop experience)")
	if err != nil || got.Index != 2 || got.Name != "Windows Server 2022 SERVERSTANDARD" {
		t.Errorf("edition by display name = %+v, %v", got, err)
	}
	got, err = ChooseEdition(eds, "2022", "Windows Server 2022 SERVERSTANDARDCORE")
	if err != nil || got.Index != 1 {
		t.Errorf("edition by name = %+v, %v", got, err)
	}
	if _, err := ChooseEdition(eds, "2025", ""); err == nil || !strings.Contains(err.Error(), "no Windows Server 2025 (build 26100) Datacenter Server Core edition") || !strings.Contains(err.Error(), `"Windows Server 2022 SERVERDATACENTERCORE" (Windows Server 2022 Datacenter Evaluation, build 20348)`) {
		t.Errorf("a 2022 ISO for 2025: %v", err)
	}
	if _, err := ChooseEdition(eds, "2022", "Windows Server 2022 Datacenter"); err == nil || !strings.Contains(err.Error(), `no edition "Windows Server 2022 Datacenter"; it has`) {
		t.Errorf("unknown edition: %v", err)
	}
	if _, err := ChooseEdition(eds, "2025", "Windows Server 2022 Datacenter Evaluation"); err == nil || !strings.Contains(err.Error(), "is build 20348, not Windows Server 2025") {
		t.Errorf("named edition of the wrong build: %v", err)
	}
}

// TestEditionsWithoutInstallationType checks that an image list that names
// its images only (no INSTALLATIONTYPE or EDITIONID) is read by the names:
// Microsoft's SERVER...CORE names, or display-style names.
func TestEditionsWithoutInstallationType(t *testing.T) {
	for name, c := range map[string]struct {
		list string
		want string
	}{
		"media names": {`<WIM><IMAGE INDEX="1"><NAME>Windows Server 2022 SERVERDATACENTER</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="2"><NAME>Windows Server 2022 SERVERDATACENTERCORE</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE></WIM>`, "Windows Server 2022 SERVERDATACENTERCORE"},
		"display names": {`<WIM><IMAGE INDEX="1"><NAME>Windows Server 2022 Datacenter (Desktop Experience)</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE>
<IMAGE INDEX="2"><NAME>Windows Server 2022 Datacenter</NAME><WINDOWS><VERSION><BUILD>20348</BUILD></VERSION></WINDOWS></IMAGE></WIM>`, "Windows Server 2022 Datacenter"},
	} {
		t.Run(name, func(t *testing.T) {
			eds, err := Editions(bytes.NewReader(wim(t, c.list)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ChooseEdition(eds, "2022", "")
			if err != nil || got.Name != c.want {
				t.Errorf("chose %+v, %v; want %s", got, err, c.want)
			}
		})
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

func isoWith(t *testing.T, files map[string][]byte) string { return winimagetest.ISO(t, files) }

func TestISOEditions(t *testing.T) {
	iso := isoWith(t, map[string][]byte{"README.TXT": []byte("UDF"), "SOURCES/INSTALL.WIM": wim(t, server2022List), "setup.exe": {1}})
	eds, err := ISOEditions(iso)
	if err != nil {
		t.Fatal(err)
	}
	if len(eds) != 4 || eds[2].Name != "Windows Server 2022 SERVERDATACENTERCORE" {
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
