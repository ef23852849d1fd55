package node

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/pkg/sftp"
)

// FileWriter is a Transport that also writes files itself, byte for byte,
// without a shell in between. Windows nodes take every file this way (see
// Node.CopyTo).
type FileWriter interface {
	// WriteFile writes everything read from r to the file at p, an
	// absolute SFTP path ("/C:/hwk/x.tar" on Windows), with mode, creating
	// its parent directories; a failed write leaves no file under p.
	WriteFile(ctx context.Context, r io.Reader, p string, mode fs.FileMode) error
}

// WriteFile implements FileWriter over the SFTP subsystem of the node's
// sshd (Win32-OpenSSH's default sshd_config has "Subsystem sftp
// sftp-server.exe"), on the connection commands share.
func (s *SSH) WriteFile(ctx context.Context, r io.Reader, p string, mode fs.FileMode) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	sc, err := sftp.NewClient(conn.client)
	if err != nil {
		// A dropped connection, as in Run: the next call redials.
		if why := conn.why(); why != nil {
			err = why
		}
		s.drop(conn)
		return fmt.Errorf("ssh %s: start sftp (is the node's sshd missing its sftp subsystem?): %w", s.cfg.Addr, err)
	}
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer func() {
		stop()
		sc.Close()
	}()
	err = writeFile(sc, r, p, mode)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if why := conn.why(); err != nil && why != nil {
		return fmt.Errorf("ssh %s: sftp: %w", s.cfg.Addr, why)
	}
	if err != nil {
		return fmt.Errorf("ssh %s: sftp: %w", s.cfg.Addr, err)
	}
	return nil
}

func writeFile(sc *sftp.Client, r io.Reader, p string, mode fs.FileMode) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("%s: not an absolute path", p)
	}
	// A Windows path's first element is its drive ("/C:"), which Stat
	// finds, so MkdirAll stops there.
	if err := sc.MkdirAll(path.Dir(p)); err != nil {
		return fmt.Errorf("mkdir %s: %w", path.Dir(p), err)
	}
	// Beside the target, so the rename stays on one volume; the target
	// name appears only once the whole file is there.
	tmp := p + ".hwk-tmp"
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	// Several packets in flight: the stream's length is unknown (an image
	// archive as it is made), where ReadFrom would write one 32 KiB packet
	// per round trip. A failed write's holes are in the temporary file,
	// which goes.
	_, err = f.ReadFromWithConcurrency(r, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// On Windows sftp-server's chmod only sets or clears the
		// read-only bit (Win32-OpenSSH win32compat/misc.c, w32_chmod);
		// the owner-write bit every caller passes leaves it clear.
		err = sc.Chmod(tmp, mode.Perm())
	}
	if err == nil {
		// posix-rename@openssh.com replaces an existing target, on Linux
		// (rename(2)) and on Windows (w32_rename: MoveFileExW with
		// MOVEFILE_REPLACE_EXISTING); the protocol's own rename refuses to.
		err = sc.PosixRename(tmp, p)
	}
	if err != nil {
		_ = sc.Remove(tmp)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// SFTPPath returns the SFTP path of a file on a node: a Windows path
// (C:\hwk\x.tar) becomes /C:/hwk/x.tar, the form Win32-OpenSSH's
// sftp-server reads and answers in (its realpath drops the slash before a
// drive letter); a POSIX path stays as it is.
func SFTPPath(p string) (string, error) {
	if len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') && isLetter(p[0]) {
		return "/" + strings.ReplaceAll(p, `\`, "/"), nil
	}
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	return "", fmt.Errorf("%q is neither a Windows path with a drive (C:\\...) nor an absolute POSIX path", p)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
