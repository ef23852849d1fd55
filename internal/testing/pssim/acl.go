package pssim

import (
	"slices"
	"strings"
)

// Well-known SIDs ("Well-known SIDs", learn.microsoft.com/windows/win32/secauthz/well-known-sids).
const (
	sidSystem        = "S-1-5-18"
	sidAdmins        = "S-1-5-32-544"
	sidUsers         = "S-1-5-32-545"
	sidAuthUsers     = "S-1-5-11"
	sidEveryone      = "S-1-1-0"
	sidCreatorOwner  = "S-1-3-0"
	sidTrusted       = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464" // NT SERVICE\TrustedInstaller
	sidAdministrator = "S-1-5-21-1004336348-1177238915-682003330-500"                   // the machine's Administrator (RID 500)
)

// Access masks as icacls names them ("icacls", learn.microsoft.com/
// windows-server/administration/windows-commands/icacls; FILE_ALL_ACCESS
// and FILE_GENERIC_* in winnt.h).
const (
	maskF  = 0x1f01ff
	maskM  = 0x1301bf
	maskRX = 0x1200a9
	maskR  = 0x120089
	maskW  = 0x100116
	// maskWrite are the rights Win32-OpenSSH counts as write access
	// (FILE_WRITE_DATA|FILE_APPEND_DATA|FILE_WRITE_EA|FILE_WRITE_ATTRIBUTES:
	// PowerShell/openssh-portable contrib/win32/win32compat/w32-sshfileperm.c).
	maskWrite = 0x116
)

// ACE is one access-allowed entry of a DACL with its inheritance flags
// (OI: files inherit it, CI: directories do, IO: not for this object).
// The model has no deny entries: hwk's scripts write none.
type ACE struct {
	SID        string
	Mask       uint32
	OI, CI, IO bool
	Inherited  bool
}

// ACL is a file's or directory's owner and DACL; Protected is
// SE_DACL_PROTECTED (inheritance off, icacls /inheritance:r or :d).
type ACL struct {
	Owner     string
	Protected bool
	ACEs      []ACE
}

func (a *ACL) clone() *ACL {
	c := *a
	c.ACEs = slices.Clone(a.ACEs)
	return &c
}

// Has reports whether an entry for sid (not inherit-only) grants all of mask.
func (a *ACL) Has(sid string, mask uint32) bool {
	for _, e := range a.ACEs {
		if e.SID == sid && !e.IO && e.Mask&mask == mask {
			return true
		}
	}
	return false
}

// defaultACLs are Windows Server's ACLs of the folders a fresh install
// has, as `icacls C:\ C:\ProgramData` shows them (protected, explicit).
var defaultACLs = map[string]func() *ACL{
	`c:\`: func() *ACL {
		return &ACL{Owner: sidTrusted, Protected: true, ACEs: []ACE{
			{SID: sidSystem, Mask: maskF, OI: true, CI: true}, {SID: sidAdmins, Mask: maskF, OI: true, CI: true},
			{SID: sidUsers, Mask: maskRX, OI: true, CI: true},
			{SID: sidAuthUsers, Mask: maskM, OI: true, CI: true, IO: true}, {SID: sidAuthUsers, Mask: 0x4, CI: false},
			{SID: sidCreatorOwner, Mask: maskF, OI: true, CI: true, IO: true}}}
	},
	`c:\programdata`: func() *ACL {
		return &ACL{Owner: sidSystem, Protected: true, ACEs: []ACE{
			{SID: sidSystem, Mask: maskF, OI: true, CI: true}, {SID: sidAdmins, Mask: maskF, OI: true, CI: true},
			{SID: sidCreatorOwner, Mask: maskF, OI: true, CI: true, IO: true},
			{SID: sidUsers, Mask: maskRX, OI: true, CI: true}, {SID: sidUsers, Mask: 0x116, CI: true}}}
	},
}

// acl is the ACL of p (a file or directory that exists); one never set
// is what the object inherited from its parent when it was made.
func (f *fsys) acl(p string) *ACL {
	k := key(p)
	if a, ok := f.acls[k]; ok {
		return a
	}
	var a *ACL
	switch def, ok := defaultACLs[k]; {
	case ok:
		a = def()
	case len(cleanPath(p)) <= 3:
		// Another drive's root (a CD: CDFS has no ACLs, everyone reads).
		a = &ACL{Owner: sidAdmins, ACEs: []ACE{{SID: sidEveryone, Mask: maskRX, OI: true, CI: true}}}
	default:
		a = inherit(f.acl(parent(p)), f.isDir(p), f.owner)
	}
	f.acls[k] = a
	return a
}

// inherit is the ACL a new object gets from its parent's ACL: the
// entries that flow to its kind, marked inherited, CREATOR OWNER
// becoming the owner ("How DACLs Control Access"/"ACE Inheritance
// Rules", learn.microsoft.com/windows/win32/secauthz/ace-inheritance-rules).
func inherit(p *ACL, dir bool, owner string) *ACL {
	a := &ACL{Owner: owner}
	for _, e := range p.ACEs {
		switch {
		case !dir && e.OI:
			a.ACEs = append(a.ACEs, ACE{SID: creator(e.SID, owner), Mask: e.Mask, Inherited: true})
		case dir && e.CI && e.SID == sidCreatorOwner:
			a.ACEs = append(a.ACEs, ACE{SID: owner, Mask: e.Mask, Inherited: true},
				ACE{SID: e.SID, Mask: e.Mask, OI: e.OI, CI: true, IO: true, Inherited: true})
		case dir && e.CI:
			a.ACEs = append(a.ACEs, ACE{SID: e.SID, Mask: e.Mask, OI: e.OI, CI: true, Inherited: true})
		case dir && e.OI:
			a.ACEs = append(a.ACEs, ACE{SID: e.SID, Mask: e.Mask, OI: true, IO: true, Inherited: true})
		}
	}
	return a
}

func creator(sid, owner string) string {
	if sid == sidCreatorOwner {
		return owner
	}
	return sid
}

// setACL replaces p's ACL and re-applies inheritance below p, as
// SetNamedSecurityInfo does for the children that inherit.
func (f *fsys) setACL(p string, a *ACL) {
	f.acls[key(p)] = a
	if !f.isDir(p) {
		return
	}
	for _, c := range f.children(p) {
		old := f.acl(c)
		if old.Protected {
			continue
		}
		n := old.clone()
		n.ACEs = slices.DeleteFunc(n.ACEs, func(e ACE) bool { return e.Inherited })
		n.ACEs = append(n.ACEs, inherit(a, f.isDir(c), old.Owner).ACEs...)
		f.setACL(c, n)
	}
}

// sddlACL is a security descriptor Win32-OpenSSH writes as SDDL, for
// owner and entries granting full access (FA) or read-execute (0x1200a9).
func sddlACL(owner string, oici bool, full []string, read ...string) *ACL {
	a := &ACL{Owner: owner, Protected: true}
	for _, s := range full {
		a.ACEs = append(a.ACEs, ACE{SID: s, Mask: maskF, OI: oici, CI: oici})
	}
	for _, s := range read {
		a.ACEs = append(a.ACEs, ACE{SID: s, Mask: maskRX, OI: oici, CI: oici})
	}
	return a
}

// trustedSSH are the SIDs Win32-OpenSSH's permission checks never
// question: Administrators, SYSTEM, TrustedInstaller, and the user.
func trustedSSH(sid, user string) bool {
	return sid == sidAdmins || sid == sidSystem || sid == sidTrusted || (user != "" && sid == user)
}

// secureFile is check_secure_file_permission (openssh-portable a915f06,
// contrib/win32/win32compat/w32-sshfileperm.c): the owner must be
// trusted, and an entry for anyone else may only read, and only when
// readOK. It returns why not, or "".
func (f *fsys) secureFile(p, user string, readOK bool) string {
	a := f.acl(p)
	if !trustedSSH(a.Owner, user) {
		return "Bad owner on " + p
	}
	for _, e := range a.ACEs {
		if trustedSSH(e.SID, user) || (readOK && e.Mask&maskWrite == 0) {
			continue
		}
		return "Bad permissions. Try removing permissions for user: " + sidName(e.SID) + " (" + e.SID + ") on file " + strings.ReplaceAll(p, `\`, "/") + "."
	}
	return ""
}

// secureFolder is check_secure_folder_permission (same file): owner
// Administrators or SYSTEM, nobody else with write access; every entry
// counts, inherit-only ones too.
func (f *fsys) secureFolder(p string) bool {
	a := f.acl(p)
	if a.Owner != sidAdmins && a.Owner != sidSystem {
		return false
	}
	for _, e := range a.ACEs {
		if e.SID != sidAdmins && e.SID != sidSystem && e.Mask&maskWrite != 0 {
			return false
		}
	}
	return true
}

// accounts are the names icacls resolves, by lower-case name, English
// only: a localized name fails as on a machine in another language.
var accounts = map[string]string{
	"system": sidSystem, `nt authority\system`: sidSystem, "administrators": sidAdmins, `builtin\administrators`: sidAdmins,
	"users": sidUsers, `builtin\users`: sidUsers, "authenticated users": sidAuthUsers, `nt authority\authenticated users`: sidAuthUsers,
	"everyone": sidEveryone, "creator owner": sidCreatorOwner, "administrator": sidAdministrator,
}

func sidName(sid string) string {
	names := map[string]string{sidSystem: `NT AUTHORITY\SYSTEM`, sidAdmins: `BUILTIN\Administrators`, sidUsers: `BUILTIN\Users`,
		sidAuthUsers: `NT AUTHORITY\Authenticated Users`, sidEveryone: "Everyone", sidAdministrator: `WIN-HWKBUILD\Administrator`}
	if n, ok := names[sid]; ok {
		return n
	}
	return sid
}
