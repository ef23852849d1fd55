package main

// wineFailure is a test that fails under Wine for a reason of Wine's, not
// of Windows' or of hwk's: the Wine bug, or what Wine does differently,
// with what shows it.
type wineFailure struct {
	Package string // relative to the module, as in the table
	// Test is a top-level test function, or a subtest (TestX/sub, as go
	// test names it): a test whose failed subtests are all listed is
	// Wine's, and its other subtests still count.
	Test string
	Why  string
}

// Wine 10.0's CreateSymbolicLinkW is a stub that returns TRUE and makes
// nothing (dlls/kernelbase/file.c: FIXME("stub"); return TRUE), so
// os.Symlink "succeeds" and the link is not there; Windows makes it (with
// Developer Mode or as administrator) or fails with
// ERROR_PRIVILEGE_NOT_HELD, which the tests skip on.
const wineSymlink = "Wine 10.0's CreateSymbolicLinkW is a stub that returns TRUE and makes no link (dlls/kernelbase/file.c); Windows makes the link or refuses it"

// Wine 10 gives Windows programs no AF_UNIX sockets: socket() fails with
// WSAEAFNOSUPPORT (10047), as wineserver's server/sock.c maps no such
// family (its AF_UNIX merge request, gitlab.winehq.org/wine/wine
// merge_requests/2786, is not in 10.0); Windows 10 1803 and later have
// them (afunix.sys).
const wineAFUnix = "Wine 10 has no AF_UNIX sockets for Windows programs (WSAEAFNOSUPPORT, 10047: server/sock.c; merge request 2786 not in 10.0); Windows 10 1803+ has them"

// wineFailures is the Wine list. Every entry is reported when it fails,
// and is an error when it passes (take it off then).
var wineFailures = []wineFailure{
	{"internal/drivers/libvirt", "TestFindSocket", wineAFUnix},
	{"internal/drivers/libvirt", "TestConnectToDeadSocket", wineAFUnix},
	{"cmd/hwk", "TestHostileInput/down_--name_linked", wineSymlink + ": the fixture's link to another directory is not there, so down finds no cluster and exits 0"},
	{"internal/state", "TestWriteFileAtomicThroughSymlink", wineSymlink},
	{"internal/state", "TestRemoveRefusesLinks", wineSymlink + "; nor does Wine make junctions: NtFsControlFile has no FSCTL_SET_REPARSE_POINT (dlls/ntdll/unix/file.c), so mklink /J fails, which any Windows user may run"},
}
