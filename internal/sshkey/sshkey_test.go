package sshkey

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestNewSignsAndVerifies(t *testing.T) {
	p, err := New("hwk-demo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Public, "ssh-ed25519 ") || !strings.HasSuffix(p.Public, " hwk-demo") {
		t.Errorf("public line %q", p.Public)
	}
	signer, err := p.Signer()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := p.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.Sign(nil, []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Verify([]byte("data"), sig); err != nil {
		t.Errorf("the public half does not verify the private half's signature: %v", err)
	}
	if !bytes.Equal(signer.PublicKey().Marshal(), pub.Marshal()) {
		t.Error("the halves are not one key")
	}
	other, _ := New("")
	if other.Public == p.Public {
		t.Error("two keys are the same")
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "id_ed25519")
	made, err := LoadOrCreate(path, "hwk-demo")
	if err != nil {
		t.Fatal(err)
	}
	// Windows: Chmod sets only the read-only attribute; the key has its
	// directory's inherited ACL (state.WriteFileAtomic): no mode to check.
	if st, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o600) {
		t.Errorf("private key file: %v %v", st, err)
	}
	again, err := LoadOrCreate(path, "ignored")
	if err != nil || again.Public != made.Public || !bytes.Equal(again.Private, made.Private) {
		t.Errorf("a second LoadOrCreate made a new key: %v", err)
	}
	if _, err := ssh.ParsePrivateKey(again.Private); err != nil {
		t.Error(err)
	}

	if err := os.Remove(path + ".pub"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path, ""); err == nil || !strings.Contains(err.Error(), "half there") {
		t.Errorf("half a pair: %v", err)
	}
	if err := os.WriteFile(path+".pub", []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path, ""); err == nil {
		t.Error("a broken public key loaded")
	}
}

func TestLoadNeverMakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), "SSH key: open "+path) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("Load made a key")
	}
	made, err := LoadOrCreate(path, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path); err != nil || got.Public != made.Public {
		t.Errorf("load: %v", err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), "SSH key "+path+": ") {
		t.Errorf("broken private key: %v", err)
	}
}
