// Package sshkey makes and keeps the SSH keys of a cluster: the cluster's
// own key, with which hwk logs in to every VM node, and each node's host
// key, made by hwk and put on the node's seed so that the node's identity
// is pinned before it first boots.
package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hwk-dev/hwk/internal/state"
)

// Pair is an ed25519 key: the private half in OpenSSH's format and the
// public half as an authorized_keys line.
type Pair struct {
	Private []byte
	Public  string
}

// New makes a key; comment ends its public line.
func New(comment string) (Pair, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("make SSH key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return Pair{}, fmt.Errorf("make SSH key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return Pair{}, fmt.Errorf("make SSH key: %w", err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if comment != "" {
		line += " " + comment
	}
	return Pair{Private: pem.EncodeToMemory(block), Public: line}, nil
}

// Signer returns the private half, for logging in.
func (p Pair) Signer() (ssh.Signer, error) {
	return ssh.ParsePrivateKey(p.Private)
}

// PublicKey returns the public half, for pinning a host key.
func (p Pair) PublicKey() (ssh.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(p.Public))
	return k, err
}

// Load reads the key at path (private) and path.pub (public).
func Load(path string) (Pair, error) {
	priv, err := os.ReadFile(path)
	if err != nil {
		return Pair{}, fmt.Errorf("SSH key: %w", err)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		return Pair{}, fmt.Errorf("SSH key: %w", err)
	}
	p := Pair{Private: priv, Public: strings.TrimSpace(string(pub))}
	if _, err := p.Signer(); err != nil {
		return Pair{}, fmt.Errorf("SSH key %s: %w", path, err)
	}
	if _, err := p.PublicKey(); err != nil {
		return Pair{}, fmt.Errorf("SSH key %s.pub: %w", path, err)
	}
	return p, nil
}

// LoadOrCreate reads the key at path (private) and path.pub (public), or
// makes one and writes them, the private half 0600. A half-written pair
// (one file without the other) is an error rather than silently replaced:
// it may still be in use by a node.
func LoadOrCreate(path, comment string) (Pair, error) {
	_, perr := os.Stat(path)
	_, uerr := os.Stat(path + ".pub")
	switch {
	case perr == nil && uerr == nil:
		return Load(path)
	case errors.Is(perr, fs.ErrNotExist) && errors.Is(uerr, fs.ErrNotExist):
		p, err := New(comment)
		if err != nil {
			return Pair{}, err
		}
		if err := state.WriteFileAtomic(path, p.Private, 0o600); err != nil {
			return Pair{}, err
		}
		if err := state.WriteFileAtomic(path+".pub", []byte(p.Public+"\n"), 0o644); err != nil {
			return Pair{}, err
		}
		return p, nil
	case perr != nil && !errors.Is(perr, fs.ErrNotExist):
		return Pair{}, fmt.Errorf("SSH key %s: %w", path, perr)
	case uerr != nil && !errors.Is(uerr, fs.ErrNotExist):
		return Pair{}, fmt.Errorf("SSH key %s.pub: %w", path, uerr)
	default:
		return Pair{}, fmt.Errorf("SSH key %s is half there (private and public must both exist or neither); remove both to make a new one", path)
	}
}
