// Package winimagetest makes stand-ins for a Windows ISO's parts in tests:
// an install.wim with a given image list, and the ISO around it.
package winimagetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// Server2022List is the image list of a Windows Server 2022 evaluation
// ISO, in English, laid out as Microsoft's media have it: NAME is the
// name Setup's /IMAGE/NAME matches ("Windows Server 2022
// SERVERDATACENTERCORE"), DISPLAYNAME what DISM and Setup's page show
// ("Windows Server 2022 Datacenter Evaluation"), EDITIONID and
// INSTALLATIONTYPE ("Server Core" or "Server") under WINDOWS. The names
// and edition IDs are those of SERVER_EVAL_x64FRE_en-us.iso (SHA-256
// 3e4fa6d8...5325, as listed by a wim_images.py dump of it in
// ericcames/image.builder.pipeline's windows-image-build notes).
var Server2022List = Server2022ListIn("en-US")

// Server2022ListIn is Server2022List for media in language lang.
func Server2022ListIn(lang string) string {
	image := func(index int, name, flags, display, edition, typ string) string {
		return fmt.Sprintf(`<IMAGE INDEX="%d"><WINDOWS><ARCH>9</ARCH><EDITIONID>%s</EDITIONID><INSTALLATIONTYPE>%s</INSTALLATIONTYPE>`+
			`<PRODUCTTYPE>ServerNT</PRODUCTTYPE><LANGUAGES><LANGUAGE>%s</LANGUAGE><DEFAULT>%s</DEFAULT></LANGUAGES>`+
			`<VERSION><MAJOR>10</MAJOR><MINOR>0</MINOR><BUILD>20348</BUILD><SPBUILD>587</SPBUILD></VERSION><SYSTEMROOT>WINDOWS</SYSTEMROOT></WINDOWS>`+
			`<NAME>%s</NAME><DESCRIPTION>%s</DESCRIPTION><FLAGS>%s</FLAGS><DISPLAYNAME>%s</DISPLAYNAME></IMAGE>`+"\n",
			index, edition, typ, lang, lang, name, name, flags, display)
	}
	return "<WIM><TOTALBYTES>5000000000</TOTALBYTES>\n" +
		image(1, "Windows Server 2022 SERVERSTANDARDCORE", "ServerStandardEvalCore", "Windows Server 2022 Standard Evaluation", "ServerStandardEval", "Server Core") +
		image(2, "Windows Server 2022 SERVERSTANDARD", "ServerStandardEval", "Windows Server 2022 Standard Evaluation (Desktop Experience)", "ServerStandardEval", "Server") +
		image(3, "Windows Server 2022 SERVERDATACENTERCORE", "ServerDatacenterEvalCore", "Windows Server 2022 Datacenter Evaluation", "ServerDatacenterEval", "Server Core") +
		image(4, "Windows Server 2022 SERVERDATACENTER", "ServerDatacenterEval", "Windows Server 2022 Datacenter Evaluation (Desktop Experience)", "ServerDatacenterEval", "Server") +
		"</WIM>"
}

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
func ISO(t testing.TB, files map[string][]byte) string { return iso(t, files, "") }

// ShellISO is ISO made UEFI-bootable in a way that stands in for Windows
// Setup: its El Torito image holds no boot loader, only startup.nsh.
// OVMF finds nothing to boot on it (or on an empty disk), starts its UEFI
// shell, and the shell runs script ("\r\n" line ends; `reset -s` powers
// the VM off). Needs genisoimage, mkfs.fat and mcopy.
func ShellISO(t testing.TB, files map[string][]byte, script string) string {
	return iso(t, files, script)
}

func iso(t testing.TB, files map[string][]byte, script string) string {
	t.Helper()
	tools := []string{"genisoimage"}
	if script != "" {
		tools = append(tools, "mkfs.fat", "mcopy")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("HWK_REQUIRE_GENISOIMAGE") != "" {
				t.Fatalf("%s is required (Debian: genisoimage, dosfstools, mtools)", tool)
			}
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		p := filepath.Join(tree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "server.iso")
	args := []string{"-quiet", "-udf", "-iso-level", "3", "-J", "-joliet-long", "-o", out}
	if script != "" {
		nsh := filepath.Join(dir, "startup.nsh")
		if err := os.WriteFile(nsh, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		img := filepath.Join(tree, "efiboot.img")
		for _, c := range [][]string{{"mkfs.fat", "-C", img, "1440"}, {"mcopy", "-i", img, nsh, "::/startup.nsh"}} {
			if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c[0], err, b)
			}
		}
		args = append(args, "-eltorito-alt-boot", "-e", "efiboot.img", "-no-emul-boot")
	}
	if b, err := exec.Command("genisoimage", append(args, tree)...).CombinedOutput(); err != nil {
		t.Fatalf("genisoimage: %v\n%s", err, b)
	}
	return out
}

// UpdatesDir returns a new directory holding the named files, each an
// update package's stand-in (its name after "MSCF ", a cabinet's magic).
func UpdatesDir(t testing.TB, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("MSCF "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
