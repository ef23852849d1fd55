package debian

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// ErrNotSigned is the error for a file that must be clearsigned and is
// not: there is no signed block, or text outside it that apt would not trust.
var ErrNotSigned = errors.New("not an OpenPGP clearsigned file")

// ErrUntrusted is the error for a file none of whose signatures is a good
// one made by a pinned key.
var ErrUntrusted = errors.New("not signed by a pinned Debian key")

// Keyring is a set of OpenPGP public keys, as a keyring file holds them.
type Keyring struct {
	// Why github.com/ProtonMail/go-crypto, not pault.ag/go/debian's
	// control package: that one uses the frozen golang.org/x/crypto/openpgp,
	// which cannot verify Debian's EdDSA release key. control only ever
	// parses text this package has already verified (or whose digest it
	// has checked), and is never given a keyring.
	entities openpgp.EntityList
}

// ReadKeyring reads an OpenPGP keyring: binary (a .gpg as Debian ships in
// /usr/share/keyrings) or ASCII-armored (a .asc, one or more blocks).
func ReadKeyring(r io.Reader) (*Keyring, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading keyring: %w", err)
	}
	const armorStart = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
	var list openpgp.EntityList
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----BEGIN ")) {
		list, err = openpgp.ReadKeyRing(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("reading binary keyring: %w", err)
		}
		return &Keyring{entities: list}, nil
	}
	// go-crypto's armor decoder reads one block; a file made by
	// concatenating exports (cat *.asc) has several.
	blocks := bytes.Split(data, []byte(armorStart))
	for i, b := range blocks[1:] {
		l, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(append([]byte(armorStart), b...)))
		if err != nil {
			return nil, fmt.Errorf("reading armored keyring block %d: %w", i+1, err)
		}
		list = append(list, l...)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("reading armored keyring: no %q block", armorStart)
	}
	return &Keyring{entities: list}, nil
}

// ReadKeyringFS reads every keyring file (*.asc, *.gpg, *.pgp) in dir of
// fsys into one keyring.
func ReadKeyringFS(fsys fs.FS, dir string) (*Keyring, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading keyring directory: %w", err)
	}
	k := &Keyring{}
	for _, e := range entries {
		if e.IsDir() || !slices.Contains([]string{".asc", ".gpg", ".pgp"}, path.Ext(e.Name())) {
			continue
		}
		p := path.Join(dir, e.Name())
		f, err := fsys.Open(p)
		if err != nil {
			return nil, err
		}
		one, err := ReadKeyring(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		k.entities = append(k.entities, one.entities...)
	}
	if len(k.entities) == 0 {
		return nil, fmt.Errorf("keyring directory %s holds no .asc, .gpg or .pgp key", dir)
	}
	return k, nil
}

// Fingerprints returns the primary-key fingerprints of the keyring's keys,
// upper-case hex, sorted.
func (k *Keyring) Fingerprints() []string {
	var out []string
	for _, e := range k.entities {
		out = append(out, fingerprint(e.PrimaryKey.Fingerprint))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func fingerprint(b []byte) string { return strings.ToUpper(hex.EncodeToString(b)) }

// normalizeFingerprint accepts a fingerprint as gpg prints it (spaces,
// either case) and returns it as Fingerprints does.
func normalizeFingerprint(s string) (string, error) {
	f := strings.ToUpper(strings.ReplaceAll(s, " ", ""))
	// 40 hex digits for v4 keys, 64 for v6 ones. Short and long key IDs
	// are refused: they can be forged.
	if _, err := hex.DecodeString(f); err != nil || (len(f) != 40 && len(f) != 64) {
		return "", fmt.Errorf("%q is not a full OpenPGP fingerprint (40 or 64 hex digits)", s)
	}
	return f, nil
}

// Verifier checks clearsigned files against pinned keys.
type Verifier struct {
	keys   openpgp.EntityList
	pinned []string

	// Now is the time at which keys must be valid (not expired, not
	// revoked) and signatures already made. Nil means time.Now.
	//
	// Why not the InRelease's own Date: that date is written by whoever
	// signs, so trusting it would let a key that leaked after it expired
	// (or after it was revoked) sign a back-dated InRelease. apt and gpgv
	// judge keys at the current time too. The cost: once Debian's bookworm
	// keys expire (2031-01-19), verifying needs the refreshed keys Debian
	// ships in debian-archive-keyring; a build from a lock does not verify
	// an InRelease at all, it checks each .deb against the lock's SHA-256.
	Now func() time.Time
}

// NewVerifier returns a Verifier that trusts the keys of k whose primary
// fingerprint is in pinned, and no other. Every pinned fingerprint must be
// in k, so that a wrong or truncated keyring file is caught here rather
// than as a failed verification later.
func NewVerifier(k *Keyring, pinned []string) (*Verifier, error) {
	if len(pinned) == 0 {
		return nil, errors.New("no pinned key fingerprints: a verifier that trusts no key would refuse every file")
	}
	want := map[string]bool{}
	for _, p := range pinned {
		f, err := normalizeFingerprint(p)
		if err != nil {
			return nil, fmt.Errorf("pinned key: %w", err)
		}
		want[f] = true
	}
	v := &Verifier{}
	found := map[string]bool{}
	for _, e := range k.entities {
		f := fingerprint(e.PrimaryKey.Fingerprint)
		if want[f] {
			v.keys = append(v.keys, e)
			found[f] = true
		}
	}
	for f := range want {
		v.pinned = append(v.pinned, f)
		if !found[f] {
			return nil, fmt.Errorf("the keyring has no key with the pinned fingerprint %s (it has %s): use the keyring that goes with the pins", f, strings.Join(k.Fingerprints(), ", "))
		}
	}
	slices.Sort(v.pinned)
	return v, nil
}

// Signer is a pinned key that made a good signature.
type Signer struct {
	// Fingerprint is the primary key's, which is what is pinned, even
	// when a subkey signed.
	Fingerprint string
	// Key is the fingerprint of the key that signed: the primary key or
	// one of its signing subkeys.
	Key     string
	Name    string    // the key's primary user ID
	Created time.Time // when the signature was made
}

// Signed is the verified content of a clearsigned file.
type Signed struct {
	// Text is the signed text with the clearsign dash-escaping undone
	// and LF line ends. Nothing outside it was signed.
	Text []byte
	// Signers are the pinned keys that made a good signature, in the
	// order of the signatures. There is at least one.
	Signers []Signer
}

// UntrustedError lists why each signature on a file was not accepted. It
// matches ErrUntrusted with errors.Is.
type UntrustedError struct {
	Reasons []string // one per signature
}

func (e *UntrustedError) Error() string {
	if len(e.Reasons) == 0 {
		return ErrUntrusted.Error() + ": it carries no signature"
	}
	return ErrUntrusted.Error() + ": " + strings.Join(e.Reasons, "; ")
}

func (e *UntrustedError) Is(target error) bool { return target == ErrUntrusted }

// VerifyClearsigned checks a clearsigned file (an InRelease) and returns
// its signed text. It accepts the file if at least one of its signatures is
// a good one from a pinned key (or a signing subkey of one) that is valid
// at v.Now; Debian signs each InRelease with several keys, and a key being
// rotated out must not make the others' signatures worthless.
func (v *Verifier) VerifyClearsigned(data []byte) (*Signed, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN PGP SIGNED MESSAGE-----")) {
		return nil, fmt.Errorf("%w: it does not start with -----BEGIN PGP SIGNED MESSAGE-----", ErrNotSigned)
	}
	block, rest := clearsign.Decode(trimmed)
	if block == nil {
		return nil, fmt.Errorf("%w: its signed block or signature is malformed", ErrNotSigned)
	}
	// Text after the signature is not covered by it; a parser that read
	// the whole file could be fed unsigned paragraphs.
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: it has %d bytes of unsigned text after the signature", ErrNotSigned, len(rest))
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	config := &packet.Config{Time: now}

	out := &Signed{Text: block.Plaintext}
	untrusted := &UntrustedError{}
	// go-crypto's VerifyDetachedSignature stops at the first signature
	// whose issuer it knows, good or bad; each one is checked on its own.
	packets := packet.NewOpaqueReader(block.ArmoredSignature.Body)
	for {
		op, err := packets.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			untrusted.Reasons = append(untrusted.Reasons, fmt.Sprintf("unreadable signature packet: %v", err))
			break
		}
		s, reason := v.verifyOne(op, block.Bytes, config)
		if reason != "" {
			untrusted.Reasons = append(untrusted.Reasons, reason)
			continue
		}
		out.Signers = append(out.Signers, s)
	}
	if len(out.Signers) == 0 {
		return nil, untrusted
	}
	return out, nil
}

// verifyOne checks one signature packet over signed. It returns the
// signer, or why the signature is not accepted.
func (v *Verifier) verifyOne(op *packet.OpaquePacket, signed []byte, config *packet.Config) (Signer, string) {
	p, err := op.Parse()
	if err != nil {
		return Signer{}, fmt.Sprintf("unreadable signature: %v", err)
	}
	sig, ok := p.(*packet.Signature)
	if !ok {
		return Signer{}, fmt.Sprintf("a packet of type %T where a signature should be", p)
	}
	issuer := "an unnamed key"
	switch {
	case sig.IssuerFingerprint != nil:
		issuer = fingerprint(sig.IssuerFingerprint)
	case sig.IssuerKeyId != nil:
		issuer = fmt.Sprintf("key ID %016X", *sig.IssuerKeyId)
	}
	var one bytes.Buffer
	if err := op.Serialize(&one); err != nil {
		return Signer{}, fmt.Sprintf("signature by %s: %v", issuer, err)
	}
	_, entity, err := openpgp.VerifyDetachedSignature(v.keys, bytes.NewReader(signed), &one, config)
	future := sig.CreationTime.After(config.Now())
	switch {
	case errors.Is(err, pgperrors.ErrUnknownIssuer):
		return Signer{}, fmt.Sprintf("signature by %s, which is not a pinned key", issuer)
	case future && (errors.Is(err, pgperrors.ErrSignatureExpired) || errors.Is(err, pgperrors.ErrKeyExpired)):
		// go-crypto calls a signature or key from the future expired.
		return Signer{}, fmt.Sprintf("signature by %s made %s, after this machine's clock (%s): check the clock", issuer, sig.CreationTime.UTC().Format(time.RFC3339), config.Now().UTC().Format(time.RFC3339))
	case errors.Is(err, pgperrors.ErrSignatureExpired):
		return Signer{}, fmt.Sprintf("signature by %s, which has expired", issuer)
	case errors.Is(err, pgperrors.ErrKeyExpired):
		return Signer{}, fmt.Sprintf("signature by %s, whose key has expired: update the pinned keyring (Debian's debian-archive-keyring has the current keys)", issuer)
	case errors.Is(err, pgperrors.ErrKeyRevoked):
		return Signer{}, fmt.Sprintf("signature by %s, whose key is revoked", issuer)
	case err != nil:
		return Signer{}, fmt.Sprintf("bad signature by %s: %v", issuer, err)
	}
	s := Signer{
		Fingerprint: fingerprint(entity.PrimaryKey.Fingerprint),
		Created:     sig.CreationTime,
	}
	if id := entity.PrimaryIdentity(); id != nil {
		s.Name = id.Name
	}
	for _, k := range v.keys.KeysById(*sig.IssuerKeyId) {
		if k.Entity == entity {
			s.Key = fingerprint(k.PublicKey.Fingerprint)
		}
	}
	return s, ""
}
