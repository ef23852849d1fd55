// Package debtest makes small Debian archives for tests: OpenPGP keys made
// at test time, .deb files built in Go, Packages, Release and a
// clearsigned InRelease, served by an httptest mirror that can be told to
// misbehave (unsigned, wrong signer, a Packages file or a .deb that does
// not match what the archive says of it).
package debtest

import (
	"bytes"
	"crypto"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// KeyOptions say what kind of key NewKey makes.
type KeyOptions struct {
	Name string // the user ID's name; "hwk test archive key" if empty
	// EdDSA makes an ed25519 key, as Debian's stable release keys are;
	// otherwise RSA 2048 (the smallest go-crypto verifies by default).
	EdDSA bool
	// SigningSubkey signs with a subkey, as Debian's automatic signing
	// keys do, rather than with the primary key.
	SigningSubkey bool
	// Lifetime, if set, makes the key expire that long after it is made.
	Lifetime time.Duration
}

// Key is an OpenPGP key pair made for a test.
type Key struct {
	Entity *openpgp.Entity
	signer *packet.PrivateKey
}

// NewKey makes a key.
func NewKey(t testing.TB, o KeyOptions) *Key {
	t.Helper()
	if o.Name == "" {
		o.Name = "hwk test archive key"
	}
	config := &packet.Config{Algorithm: packet.PubKeyAlgoRSA, RSABits: 2048, DefaultHash: crypto.SHA256}
	if o.EdDSA {
		config.Algorithm = packet.PubKeyAlgoEdDSA
		config.Curve = packet.Curve25519
	}
	if o.Lifetime > 0 {
		config.KeyLifetimeSecs = uint32(o.Lifetime / time.Second)
	}
	e, err := openpgp.NewEntity(o.Name, "", "test@example.invalid", config)
	if err != nil {
		t.Fatalf("making an OpenPGP key: %v", err)
	}
	k := &Key{Entity: e, signer: e.PrivateKey}
	if o.SigningSubkey {
		if err := e.AddSigningSubkey(config); err != nil {
			t.Fatalf("adding a signing subkey: %v", err)
		}
		k.signer = e.Subkeys[len(e.Subkeys)-1].PrivateKey
	}
	return k
}

// Fingerprint is the primary key's fingerprint, upper-case hex: what a
// verifier pins.
func (k *Key) Fingerprint() string {
	return strings.ToUpper(hex.EncodeToString(k.Entity.PrimaryKey.Fingerprint))
}

// SigningFingerprint is the fingerprint of the key that signs: the
// signing subkey's if there is one.
func (k *Key) SigningFingerprint() string {
	return strings.ToUpper(hex.EncodeToString(k.signer.PublicKey.Fingerprint))
}

// Public returns the public key (with its subkeys and any revocation)
// armored, as gpg --export --armor writes it.
func (k *Key) Public(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Entity.Serialize(w); err != nil {
		t.Fatalf("serializing the public key: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Revoke adds a revocation of the primary key, which Public then carries.
func (k *Key) Revoke(t testing.TB) {
	t.Helper()
	if err := k.Entity.RevokeKey(packet.KeyCompromised, "test", nil); err != nil {
		t.Fatalf("revoking the key: %v", err)
	}
}

// ClearSign clearsigns text with each key, in one signature block, as
// Debian's InRelease files are.
func ClearSign(t testing.TB, text []byte, keys ...*Key) []byte {
	t.Helper()
	var privs []*packet.PrivateKey
	for _, k := range keys {
		privs = append(privs, k.signer)
	}
	var b bytes.Buffer
	w, err := clearsign.EncodeMulti(&b, privs, &packet.Config{DefaultHash: crypto.SHA256})
	if err != nil {
		t.Fatalf("clearsigning: %v", err)
	}
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("clearsigning: %v", err)
	}
	return b.Bytes()
}
