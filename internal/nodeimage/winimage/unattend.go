// Package winimage builds hwk's Windows node image, which cannot be
// downloaded (Windows Server images may not be redistributed): the
// answer file for an unattended install from the user's ISO, the
// provisioning it runs, and the per-VM seed. The recipe's files are in
// node-images/windows.
package winimage

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"text/template"
	"unicode/utf16"

	"github.com/hwk-dev/hwk/node-images/windows"
)

// SeedLabel is the volume label of the build's seed ISO, by which the
// guest finds it whatever drive letter Windows gives it.
const SeedLabel = "HWKSEED"

// ProvisionScript is the script on the seed ISO that the first logon
// runs.
const ProvisionScript = "provision.ps1"

// UnattendOptions shape the answer file.
type UnattendOptions struct {
	// Version is the Windows Server release: "2022" or "2025".
	Version string
	// Edition is the install image's NAME in the ISO's install.wim,
	// which Setup's /IMAGE/NAME matches: "Windows Server 2022
	// SERVERDATACENTERCORE" on Microsoft's media (Edition.Name; not the
	// display name DISM shows).
	Edition string
	// AdminPassword is the Administrator's password; see NewPassword.
	AdminPassword string
	// ProductKey is optional: evaluation media need none.
	ProductKey string
	// Locale is the language of Setup, the system and its input: the
	// edition's own (Edition.Language); en-US when the image does not
	// say. ComputerName defaults to hwk-build.
	Locale       string
	ComputerName string
}

var (
	productKeyRE = regexp.MustCompile(`^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$`)
	// computerNameRE matches a NetBIOS name: at most 15 letters, digits
	// and hyphens, not all digits, not starting with a hyphen.
	computerNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,14}$`)
	// localeRE matches a language tag as Windows names its languages:
	// en-US, sr-Latn-RS.
	localeRE = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?-[A-Z]{2}$`)
)

func (o *UnattendOptions) check() error {
	if o.Locale == "" {
		o.Locale = "en-US"
	}
	if o.ComputerName == "" {
		o.ComputerName = "hwk-build"
	}
	var errs []string
	if o.Version != "2022" && o.Version != "2025" {
		errs = append(errs, fmt.Sprintf("version %q: use 2022 or 2025", o.Version))
	}
	if strings.TrimSpace(o.Edition) == "" {
		errs = append(errs, "no edition: name the install image to use (`dism /Get-WimInfo /WimFile:D:\\sources\\install.wim` lists them)")
	}
	if err := CheckPassword(o.AdminPassword); err != nil {
		errs = append(errs, err.Error())
	}
	if o.ProductKey != "" && !productKeyRE.MatchString(o.ProductKey) {
		errs = append(errs, "product key: want five groups of five letters or digits, XXXXX-XXXXX-XXXXX-XXXXX-XXXXX")
	}
	if !computerNameRE.MatchString(o.ComputerName) || strings.Trim(o.ComputerName, "0123456789") == "" {
		errs = append(errs, fmt.Sprintf("computer name %q: at most 15 letters, digits and hyphens, not all digits", o.ComputerName))
	}
	if !localeRE.MatchString(o.Locale) {
		errs = append(errs, fmt.Sprintf("locale %q: want a language tag like en-US", o.Locale))
	}
	if len(errs) > 0 {
		return fmt.Errorf("unattend: %s", strings.Join(errs, "; "))
	}
	return nil
}

// FirstLogonCommand returns what the first (automatic) logon runs: the
// provisioning script from the seed ISO, found by its label.
func FirstLogonCommand() string {
	return `powershell.exe -NoLogo -NoProfile -ExecutionPolicy Bypass -Command "` + firstLogonScript() + `"`
}

// Scripts returns every PowerShell script this package makes, by the
// declaration that makes it: for the check of every script hwk sends to
// Windows (internal/testing/pscatalog).
func Scripts() map[string]string {
	return map[string]string{"firstLogonScript": firstLogonScript()}
}

// firstLogonScript returns the PowerShell inside FirstLogonCommand; it has no
// double quotes, so the command line needs no escaping. Its output goes
// to a file of its own: provision.ps1 keeps its transcript in
// ProvisionLog, which a redirect to the same file would hold open.
func firstLogonScript() string {
	return fmt.Sprintf(`$v = Storage\Get-Volume -FileSystemLabel '%s' | Microsoft.PowerShell.Utility\Select-Object -First 1; & ($v.DriveLetter + ':\%s') *> %s`, SeedLabel, ProvisionScript, FirstLogonLog)
}

// The guest's logs of the image build: provision.ps1's transcript, and
// what the first logon's command printed around it.
const (
	ProvisionLog  = `C:\hwk-provision.log`
	FirstLogonLog = `C:\hwk-firstlogon.log`
)

// Unattend renders Autounattend.xml for an unattended UEFI install.
func Unattend(o UnattendOptions) ([]byte, error) {
	return render("autounattend.xml.tmpl", o)
}

// CloneOptions shape the answer file of one clone of the image.
type CloneOptions struct {
	// Locale is the image's language (the manifest's); en-US when "".
	Locale string
	// AdminPassword is the clone's own Administrator password; see
	// NewPassword.
	AdminPassword string
}

// CloneAnswerFile is the name under which a Windows node's seed carries
// its answer file: Windows Setup looks for unattend.xml at the root of
// removable media when no answer file of higher precedence is on the
// disk ("Windows Setup Automation Overview", implicit search order), and
// the image keeps none.
const CloneAnswerFile = "unattend.xml"

// CloneUnattend renders the answer file a clone's first boot reads from
// its seed: an out-of-box experience that asks nothing, the clone's own
// Administrator password (hidden, as Windows SIM hides it), and a
// random computer name until hwk-seed gives the node its own. The
// golden image holds no answer file, so no password is on it.
func CloneUnattend(o CloneOptions) ([]byte, error) {
	if o.Locale == "" {
		o.Locale = "en-US"
	}
	if !localeRE.MatchString(o.Locale) {
		return nil, fmt.Errorf("clone answer file: locale %q: want a language tag like en-US", o.Locale)
	}
	if err := CheckPassword(o.AdminPassword); err != nil {
		return nil, fmt.Errorf("clone answer file: %w", err)
	}
	tmpl, err := template.ParseFS(cloneTemplate, "clone-unattend.xml.tmpl")
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = tmpl.Execute(&out, map[string]any{
		"Locale": o.Locale, // matched localeRE: nothing to escape
		// Base64: nothing to escape.
		"AdminPasswordHidden": HiddenPassword(o.AdminPassword, "AdministratorPassword"),
	})
	return out.Bytes(), err
}

// cloneTemplate holds clone-unattend.xml.tmpl, CloneUnattend's template.
//
//go:embed clone-unattend.xml.tmpl
var cloneTemplate embed.FS

func render(name string, o UnattendOptions) ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	tmpl, err := template.ParseFS(windows.Recipe, name)
	if err != nil {
		return nil, err
	}
	esc := func(s string) string {
		var b bytes.Buffer
		_ = xml.EscapeText(&b, []byte(s))
		return b.String()
	}
	data := map[string]any{
		"Version":           esc(o.Version),
		"Edition":           esc(o.Edition),
		"AdminPassword":     esc(o.AdminPassword),
		"ProductKey":        esc(o.ProductKey),
		"Locale":            esc(o.Locale),
		"ComputerName":      esc(o.ComputerName),
		"EFISizeMB":         260, // 4Kn disks need 260 MB for FAT32
		"LogonCount":        1,
		"FirstLogonCommand": esc(FirstLogonCommand()),
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// HiddenPassword returns password as an answer file holds it with
// <PlainText>false</PlainText>: Base64 of the UTF-16LE of the password
// followed by the element's name (AdministratorPassword, or Password for
// AutoLogon), as Windows SIM's "Hide Sensitive Data" writes it. It keeps
// the password out of plain sight, not secret: anyone can decode it.
func HiddenPassword(password, element string) string {
	u := utf16.Encode([]rune(password + element))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// passwordAlphabet leaves out characters that need quoting in XML, cmd
// or PowerShell, and look-alikes.
const (
	lower   = "abcdefghijkmnopqrstuvwxyz"
	upper   = "ABCDEFGHJKLMNPQRSTUVWXYZ"
	digits  = "23456789"
	symbols = "-_.+=#%"
)

// NewPassword makes a random 24-character Administrator password that
// meets Windows' complexity rule (three of: lower, upper, digit, symbol;
// it has all four).
func NewPassword() (string, error) {
	all := lower + upper + digits + symbols
	pick := func(set string) (byte, error) {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			return 0, err
		}
		return set[n.Int64()], nil
	}
	for {
		b := make([]byte, 24)
		for i := range b {
			c, err := pick(all)
			if err != nil {
				return "", err
			}
			b[i] = c
		}
		if CheckPassword(string(b)) == nil {
			return string(b), nil
		}
	}
}

// CheckPassword checks p against hwk's rule for Administrator passwords,
// stricter than Windows' (three of four character classes): at least 14
// characters, all four classes, nothing that needs quoting.
func CheckPassword(p string) error {
	classes := 0
	for _, set := range []string{lower + "l", upper + "IO", digits + "01", symbols} {
		if strings.ContainsAny(p, set) {
			classes++
		}
	}
	switch {
	case len(p) < 14:
		return fmt.Errorf("administrator password: at least 14 characters")
	case classes < 4:
		return fmt.Errorf("administrator password: use lower case, upper case, digits and symbols")
	case strings.ContainsAny(p, "<>&\"' \t\r\n"):
		return fmt.Errorf("administrator password: leave out quotes, <, >, & and spaces")
	case strings.Contains(strings.ToLower(p), "administrator"):
		return fmt.Errorf("administrator password: must not contain the account name")
	}
	return nil
}
