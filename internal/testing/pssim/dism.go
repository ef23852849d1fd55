package pssim

import (
	"fmt"
	"strings"
)

// The model of dism.exe: /online /enable-feature and /disable-feature
// (optional features), and /online /add-package (update packages).
//
// DISM ends with a Win32 status or an HRESULT, which PowerShell reads as
// a signed 32-bit $LASTEXITCODE:
//   - 0 (ERROR_SUCCESS);
//   - 3010, ERROR_SUCCESS_REBOOT_REQUIRED: "The requested operation is
//     successful. Changes will not be effective until the system is
//     rebooted." (Microsoft's System Error Codes 1700-3999). An update's
//     new files, and so its new revision (UBR), are in place only after
//     that restart;
//   - 2, ERROR_FILE_NOT_FOUND, for a /packagepath that is not there;
//   - 0x800f081e (-2146498530), CBS_E_NOT_APPLICABLE, "the package is
//     not applicable" (cbsapi.h, as err.exe reads it; DISM's log says
//     "The package is not applicable to the image."), for an update this
//     Windows does not take: another release's, or one older than what
//     is installed;
//   - 0x800f0805 (-2146498555), CBS_E_INVALID_PACKAGE, "The package is
//     not valid" (Microsoft's CBS error table, TechNet cc732334), for a
//     file that is no package: the model's answer for a file the test
//     did not describe in Machine.Updates;
//   - 0x800f0823 (-2146498525), CBS_E_NEW_SERVICING_STACK_REQUIRED, for
//     an update that needs a newer servicing stack first (Microsoft's
//     release notes of KB4601382, the first combined SSU+LCU).
//
// Every failure is written to DISM's log, C:\Windows\Logs\DISM\dism.log,
// which DISM's own error text points to.

// Update describes a package file the model's DISM is given, by its name
// on the machine (Machine.Updates).
type Update struct {
	// UBR is the revision of Windows once the update is in: at the next
	// boot, or at once with NoRestart.
	UBR int
	// NotApplicable: DISM refuses it with CBS_E_NOT_APPLICABLE.
	NotApplicable bool
	// NoRestart: it is installed without a restart (status 0), as some
	// servicing stack updates are.
	NoRestart bool
	// Exit, when not zero, is the status DISM fails it with.
	Exit int
}

// DISM statuses the model gives (see above).
const (
	dismRebootRequired     = 3010
	dismFileNotFound       = 2
	cbsNotApplicable       = -2146498530 // 0x800f081e
	cbsInvalidPackage      = -2146498555 // 0x800f0805
	cbsNewServicingStackRq = -2146498525 // 0x800f0823
)

// DISMLog is where DISM logs.
const DISMLog = `C:\Windows\Logs\DISM\dism.log`

// CurrentVersion is the registry key of Windows' version: CurrentBuild,
// CurrentBuildNumber (strings) and UBR (a DWORD), as Microsoft's "Windows
// container version compatibility" page reads the host's version.
const CurrentVersion = `HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion`

// dism runs dism.exe with args, as program does. A negative status (an
// HRESULT) is set in $LASTEXITCODE here, and -1 returned: program's
// callers read a negative status as a GUI program's, not waited for, and
// leave $LASTEXITCODE (DISM's error text is then not in the output).
func (m *Machine) dism(args []string, sc *scope) (int, []any, error) {
	code, out, err := m.runDISM(args)
	if err == nil && code < 0 {
		setExit(sc, code)
		return -1, nil, nil
	}
	return code, out, err
}

func (m *Machine) runDISM(args []string) (int, []any, error) {
	var change, name, pkg string
	add := false
	for _, a := range args {
		switch l := strings.ToLower(a); {
		case l == "/enable-feature" || l == "/disable-feature":
			change = l
		case strings.HasPrefix(l, "/featurename:"):
			name = a[len("/featurename:"):]
		case l == "/add-package":
			add = true
		case strings.HasPrefix(l, "/packagepath:"):
			pkg = strings.Trim(a[len("/packagepath:"):], `"`)
		}
	}
	switch {
	case change != "" && name != "":
		// dism.exe /online /enable-feature|/disable-feature
		// /featurename:NAME [/all] [/NoRestart]
		m.changeFeature(change == "/enable-feature", name)
		return 0, nil, nil
	case add && pkg != "":
		return m.addPackage(pkg)
	}
	return 0, nil, fmt.Errorf("pssim: the model of dism.exe cannot run %s", strings.Join(args, " "))
}

// addPackage is dism.exe /online /add-package /packagepath:pkg: the
// package is read (a read-only file, a copy from a CD, will do), and its
// status is Machine.Updates' description of it. Each call is recorded in
// Machine.Packages as "NAME: STATUS".
func (m *Machine) addPackage(pkg string) (int, []any, error) {
	code, out := m.packageStatus(pkg)
	m.Packages = append(m.Packages, fmt.Sprintf("%s: %d", base(pkg), code))
	if code != 0 && code != dismRebootRequired {
		m.fs.mkdirAll(parent(DISMLog))
		prev := ""
		if f := m.fs.file(DISMLog); f != nil {
			prev = string(f.Data)
		}
		m.WriteFile(DISMLog, []byte(fmt.Sprintf("%sError                 DISM   DISM Package Manager: Failed to add package %s (hr:0x%08x)\r\n", prev, pkg, uint32(code))))
		out = append(out, "", "The DISM log file can be found at "+DISMLog)
	}
	return code, out, nil
}

func (m *Machine) packageStatus(pkg string) (int, []any) {
	if m.fs.file(pkg) == nil {
		return dismFileNotFound, []any{"", "Error: 2", "", "The system cannot find the file specified."}
	}
	u := m.Updates[strings.ToLower(base(pkg))]
	switch {
	case u == nil:
		return cbsInvalidPackage, []any{"", "Error: 0x800f0805", "", "The specified package is not valid Windows package."}
	case u.NotApplicable:
		return cbsNotApplicable, []any{"", "Error: 0x800f081e", "", "The specified package is not applicable to this image."}
	case u.Exit != 0:
		return u.Exit, []any{"", fmt.Sprintf("Error: 0x%08x", uint32(u.Exit))}
	case u.NoRestart:
		m.setUBR(u.UBR)
		return 0, nil
	}
	m.PendingUBR = max(m.PendingUBR, u.UBR)
	return dismRebootRequired, nil
}

// setUBR sets Windows' revision in the registry.
func (m *Machine) setUBR(ubr int) {
	if k := m.Registry[key(CurrentVersion)]; k != nil && ubr > 0 {
		k["UBR"] = ubr
	}
}

// finishUpdates is the boot after a restart DISM asked for: the updates
// waiting for it are in, and Windows has their revision.
func (m *Machine) finishUpdates() {
	if m.PendingUBR > 0 {
		m.setUBR(m.PendingUBR)
		m.PendingUBR = 0
	}
}

// UBR is the machine's Windows revision (CurrentVersion's UBR).
func (m *Machine) UBR() int { return toInt(m.Registry[key(CurrentVersion)]["UBR"]) }
