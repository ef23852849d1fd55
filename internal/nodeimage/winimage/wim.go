package winimage

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/internal/format/udf"
)

// Edition is one installable image of a Windows ISO's install.wim.
type Edition struct {
	Index int
	// Name is the image's NAME, which Setup's /IMAGE/NAME matches:
	// "Windows Server 2022 SERVERDATACENTERCORE" on Microsoft's media.
	Name        string
	Description string
	// DisplayName is what DISM and Setup's edition page show: "Windows
	// Server 2022 Datacenter Evaluation".
	DisplayName string
	// EditionID ("ServerDatacenterEval") and InstallationType ("Server
	// Core", or "Server" for the Desktop Experience) are the image's own
	// words for what it is.
	EditionID, InstallationType string
	// Build is the Windows build the edition installs (20348 for Windows
	// Server 2022).
	Build int
	// Language is the edition's default language (en-US, de-DE): Setup
	// stops at a page that asks when the answer file names a language the
	// media does not have.
	Language string
}

// ServerCore reports whether the edition installs Server Core, which
// hwk's nodes use (no desktop: smaller and faster to boot). The image
// records it in INSTALLATIONTYPE; an image list without it is read by its
// names.
func (e Edition) ServerCore() bool {
	if e.InstallationType != "" {
		return strings.EqualFold(e.InstallationType, "Server Core")
	}
	name := strings.ToUpper(e.Name)
	if strings.Contains(name+" "+strings.ToUpper(e.DisplayName), "DESKTOP EXPERIENCE") {
		return false
	}
	return !strings.HasSuffix(name, "SERVERSTANDARD") && !strings.HasSuffix(name, "SERVERDATACENTER")
}

// Datacenter reports whether the edition is a Datacenter one.
func (e Edition) Datacenter() bool {
	return strings.Contains(strings.ToLower(e.EditionID+" "+e.Name+" "+e.DisplayName), "datacenter")
}

// Is reports whether name names the edition: its NAME or its display
// name, in any case.
func (e Edition) Is(name string) bool {
	return strings.EqualFold(e.Name, name) || (e.DisplayName != "" && strings.EqualFold(e.DisplayName, name))
}

// String returns the edition as a list shows it.
func (e Edition) String() string {
	if e.DisplayName != "" && e.DisplayName != e.Name {
		return fmt.Sprintf("%q (%s, build %d)", e.Name, e.DisplayName, e.Build)
	}
	return fmt.Sprintf("%q (build %d)", e.Name, e.Build)
}

// WIM's header: the resource that holds the image list as XML sits at
// offset 72 (the layout of wimlib's and Microsoft's WIM documentation).
const (
	wimHeaderSize = 208
	wimXMLHeader  = 72
)

var wimMagic = []byte("MSWIM\x00\x00\x00")

// Editions reads the editions from an install.wim: its header, then the
// XML resource that lists every image (UTF-16, never compressed).
func Editions(r io.ReaderAt) ([]Edition, error) {
	head := make([]byte, wimHeaderSize)
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("install.wim: read the header: %w", err)
	}
	if !bytes.Equal(head[:8], wimMagic) {
		if bytes.HasPrefix(head, []byte("MSWIM")) || bytes.HasPrefix(head, []byte("ESD")) {
			return nil, fmt.Errorf("install.wim: not a WIM this version of hwk reads")
		}
		return nil, fmt.Errorf("install.wim: not a WIM file (an install.esd? use an ISO with sources\\install.wim)")
	}
	res := head[wimXMLHeader : wimXMLHeader+24]
	size := int64(binary.LittleEndian.Uint64(append(res[:7:7], 0)))
	offset := int64(binary.LittleEndian.Uint64(res[8:16]))
	if size <= 2 || size > 64<<20 {
		return nil, fmt.Errorf("install.wim: the image list is %d bytes, not a sane size", size)
	}
	raw := make([]byte, size)
	if _, err := r.ReadAt(raw, offset); err != nil {
		return nil, fmt.Errorf("install.wim: read the image list: %w", err)
	}
	return parseWIMXML(raw)
}

// ISOEditions reads the editions of a Windows installation ISO: its
// sources/install.wim, found in the disc's UDF tree (the ISO 9660 side of
// Microsoft's media holds only a README).
func ISOEditions(iso string) ([]Edition, error) {
	f, err := os.Open(iso)
	if err != nil {
		return nil, fmt.Errorf("--iso: %w", err)
	}
	defer f.Close()
	u, err := udf.Open(f)
	if errors.Is(err, udf.ErrNotUDF) {
		return nil, fmt.Errorf("--iso %s is not Windows installation media: %w", iso, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--iso %s: %w", iso, err)
	}
	wim, err := u.OpenFile("sources/install.wim")
	if errors.Is(err, fs.ErrNotExist) {
		hint := ""
		if _, e := u.OpenFile("sources/install.esd"); e == nil {
			hint = " (it has sources/install.esd: consumer media made by the Media Creation Tool; use a Windows Server ISO)"
		}
		return nil, fmt.Errorf("--iso %s has no sources/install.wim%s", iso, hint)
	}
	if err != nil {
		return nil, fmt.Errorf("--iso %s: %w", iso, err)
	}
	eds, err := Editions(wim)
	if err != nil {
		return nil, fmt.Errorf("--iso %s: %w", iso, err)
	}
	return eds, nil
}

// parseWIMXML reads the UTF-16LE image list.
func parseWIMXML(raw []byte) ([]Edition, error) {
	if len(raw)%2 != 0 {
		return nil, fmt.Errorf("install.wim: the image list is not UTF-16")
	}
	u := make([]uint16, len(raw)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	text := strings.TrimPrefix(string(utf16.Decode(u)), "\ufeff")
	var doc struct {
		Images []struct {
			Index       int    `xml:"INDEX,attr"`
			Name        string `xml:"NAME"`
			Description string `xml:"DESCRIPTION"`
			DisplayName string `xml:"DISPLAYNAME"`
			EditionID   string `xml:"WINDOWS>EDITIONID"`
			Type        string `xml:"WINDOWS>INSTALLATIONTYPE"`
			Build       int    `xml:"WINDOWS>VERSION>BUILD"`
			Language    string `xml:"WINDOWS>LANGUAGES>DEFAULT"`
		} `xml:"IMAGE"`
	}
	if err := xml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("install.wim: the image list: %w", err)
	}
	if len(doc.Images) == 0 {
		return nil, fmt.Errorf("install.wim lists no images")
	}
	out := make([]Edition, len(doc.Images))
	for i, im := range doc.Images {
		out[i] = Edition{Index: im.Index, Name: im.Name, Description: im.Description, DisplayName: im.DisplayName,
			EditionID: im.EditionID, InstallationType: im.Type, Build: im.Build, Language: strings.TrimSpace(im.Language)}
	}
	return out, nil
}

// ChooseEdition picks the edition to install for Windows Server version:
// the one named want (by its NAME or the display name DISM shows), else
// the Datacenter Server Core edition. It fails when the ISO is of another
// Windows build, naming what it holds.
func ChooseEdition(editions []Edition, version, want string) (Edition, error) {
	build := map[string]int{"2022": buildOf2022, "2025": buildOf2025}[version]
	if build == 0 {
		return Edition{}, fmt.Errorf("version %q: use 2022 or 2025", version)
	}
	var names []string
	for _, e := range editions {
		names = append(names, e.String())
	}
	list := strings.Join(names, ", ")
	if want != "" {
		for _, e := range editions {
			if e.Is(want) {
				if e.Build != build {
					return Edition{}, fmt.Errorf("edition %q is build %d, not Windows Server %s (build %d)", e.Name, e.Build, version, build)
				}
				return e, nil
			}
		}
		return Edition{}, fmt.Errorf("the ISO has no edition %q; it has %s", want, list)
	}
	for _, e := range editions {
		if e.Build == build && e.ServerCore() && e.Datacenter() {
			return e, nil
		}
	}
	return Edition{}, fmt.Errorf("the ISO has no Windows Server %s (build %d) Datacenter Server Core edition; it has %s\n  fix: pick one with --edition, or use a Windows Server %s ISO", version, build, list, version)
}

const (
	buildOf2022 = 20348
	buildOf2025 = 26100
)
