package pssim

import (
	"fmt"
	"regexp"
	"strings"
)

const sshDir = `C:\ProgramData\ssh`

// hostKeyNames are the host keys sshd loads with no HostKey lines, and
// ssh-keygen -A makes (openssh-portable servconf.c, ssh-keygen.c).
var hostKeyNames = []string{"ssh_host_rsa_key", "ssh_host_ecdsa_key", "ssh_host_ed25519_key"}

// makeSSHDir is sshd's create_prgdata_ssh_folder (openssh-portable
// a915f06, contrib/win32/win32compat/wmain_sshd.c): the folder with
// O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;AU).
func (m *Machine) makeSSHDir() {
	m.fs.mkdirAll(sshDir)
	m.fs.setACL(sshDir, sddlACL(sidAdmins, true, []string{sidSystem, sidAdmins}, sidAuthUsers))
}

// sshDirFixture: WriteFile into C:\ProgramData\ssh makes the folder as
// sshd does, the only program that makes it on a real machine.
func (m *Machine) sshDirFixture(p string) {
	if strings.HasPrefix(key(p), key(sshDir)+`\`) && !m.fs.isDir(sshDir) {
		m.makeSSHDir()
	}
}

// sshdStart is what sshd.exe does as its service starts (wmain_sshd.c
// prereq_setup, sshd.c): an existing C:\ProgramData\ssh must pass
// check_secure_folder_permission or sshd exits; sshd_config is copied
// from sshd_config_default when missing; ssh-keygen -A makes missing host
// keys; a private host key whose ACL lets anyone but SYSTEM and
// Administrators in is ignored (authfile.c sshkey_perm_ok, read_ok 0),
// and with no host key sshd exits. It returns why sshd exited, or "".
func (m *Machine) sshdStart(s *Service) string {
	if !m.fs.isDir(sshDir) {
		m.makeSSHDir()
	} else if !m.fs.secureFolder(sshDir) {
		return "Directory already exists but folder permissions are invalid"
	}
	cfg := join(sshDir, "sshd_config")
	if m.fs.file(cfg) == nil {
		if err := m.fs.copyFile(join(parent(s.BinPath), "sshd_config_default"), cfg, false); err != nil {
			return fmt.Sprintf("Failed to copy sshd_config_default: %v", err)
		}
	}
	m.sshHostKeys = nil
	for _, k := range hostKeyNames {
		p := join(sshDir, k)
		if m.fs.file(p) == nil {
			m.keygen(p)
		}
		if why := m.fs.secureFile(p, sidSystem, false); why != "" {
			m.Log = append(m.Log, "sshd: "+why+" Permissions for '"+p+"' are too open. This private key will be ignored.")
			continue
		}
		m.sshHostKeys = append(m.sshHostKeys, p)
	}
	if len(m.sshHostKeys) == 0 {
		return "sshd: no hostkeys available -- exiting."
	}
	return ""
}

// keygen is ssh-keygen -A run by sshd as SYSTEM: a private key made with
// mode 0600 gets O:SY D:PAI(A;;FA;;;BA)(A;;FA;;;SY) and the owner; its .pub
// (0644) everyone's read too (contrib/win32/win32compat/fileio.c).
func (m *Machine) keygen(p string) {
	_ = m.fs.write(p, []byte("host key"), false)
	m.fs.setACL(p, sddlACL(sidSystem, false, []string{sidAdmins, sidSystem}))
	pub := p + ".pub"
	if m.fs.file(pub) == nil {
		_ = m.fs.write(pub, []byte("ssh-ed25519 AAAA host"), false)
		m.fs.setACL(pub, sddlACL(sidSystem, false, []string{sidAdmins, sidSystem}, sidEveryone))
	}
}

// repairSSHDir is what install-sshd.ps1 does to an existing
// C:\ProgramData\ssh (Repair-SSHFolderPermission, -FilePermission,
// -PrivateKeyPermission in contrib/win32/openssh/OpenSSHUtils.psm1):
// SYSTEM and Administrators full, Authenticated Users read, but not on
// private host keys.
func (m *Machine) repairSSHDir() {
	if !m.fs.isDir(sshDir) {
		return
	}
	m.makeSSHDir()
	for _, f := range m.fs.walk(sshDir) {
		a := sddlACL(m.fs.acl(f.Path).Owner, false, []string{sidSystem, sidAdmins}, sidAuthUsers)
		if isPrivateHostKey(f.Path) {
			a = sddlACL(a.Owner, false, []string{sidSystem, sidAdmins})
		}
		m.fs.setACL(f.Path, a)
	}
}

func isPrivateHostKey(p string) bool {
	b := strings.ToLower(base(p))
	return strings.HasPrefix(b, "ssh_host_") && strings.HasSuffix(b, "_key")
}

// SSHHostKeys are the private host key files the running sshd loaded.
func (m *Machine) SSHHostKeys() []string { return m.sshHostKeys }

var adminKeysRE = regexp.MustCompile(`(?mi)^\s*Match\s+Group\s+administrators\s*\r?\n\s*AuthorizedKeysFile\s+(\S+)`)

// SSHLogin is a public-key login by Administrator (a member of
// Administrators) offering key, an authorized_keys line's key: sshd must
// run, and the key be in the file sshd_config names for administrators
// (its Match Group administrators block) or else in the user's
// .ssh\authorized_keys. With StrictModes (the default) a file whose
// owner is not trusted, or that grants anyone but SYSTEM, Administrators
// and the user write access, is refused (auth2-pubkeyfile.c, read_ok 1).
func (m *Machine) SSHLogin(key string) error {
	if s := m.service("sshd"); s == nil || s.Status != "Running" {
		return fmt.Errorf("ssh: connect to host port 22: Connection refused (sshd is not running)")
	}
	cfg := m.fs.file(join(sshDir, "sshd_config"))
	if cfg == nil {
		return fmt.Errorf("sshd runs without %s", join(sshDir, "sshd_config"))
	}
	text := string(cfg.Data)
	file := `C:\Users\Administrator\.ssh\authorized_keys`
	if g := adminKeysRE.FindStringSubmatch(text); g != nil {
		file = cleanPath(strings.ReplaceAll(g[1], "__PROGRAMDATA__", `C:\ProgramData`))
	}
	f := m.fs.file(file)
	if f == nil {
		return fmt.Errorf("ssh: Permission denied (publickey): %s does not exist", file)
	}
	strict := !regexp.MustCompile(`(?mi)^\s*StrictModes\s+no\b`).MatchString(text)
	if why := m.fs.secureFile(file, sidAdministrator, true); strict && why != "" {
		return fmt.Errorf("ssh: Permission denied (publickey): %s; Authentication refused", why)
	}
	if key == "" || !strings.Contains(string(f.Data), key) {
		return fmt.Errorf("ssh: Permission denied (publickey): the key is not in %s", file)
	}
	return nil
}
