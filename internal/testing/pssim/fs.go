package pssim

import (
	"fmt"
	"sort"
	"strings"
)

// File is a file on the model machine.
type File struct {
	Path     string
	Data     []byte
	ReadOnly bool
}

// fsys is the machine's drives: files and directories by their
// case-insensitive path, and their ACLs (acl.go). owner is the account
// that makes new files: SYSTEM, which hwk's scripts run as.
type fsys struct {
	files map[string]*File
	dirs  map[string]string
	acls  map[string]*ACL
	owner string
}

func newFS() *fsys {
	return &fsys{files: map[string]*File{}, dirs: map[string]string{}, acls: map[string]*ACL{}, owner: sidSystem}
}

// cleanPath is p with backslashes, no doubled or trailing separators.
func cleanPath(p string) string {
	p = strings.ReplaceAll(p, "/", `\`)
	for strings.Contains(p, `\\`) {
		p = strings.ReplaceAll(p, `\\`, `\`)
	}
	if len(p) > 3 {
		p = strings.TrimSuffix(p, `\`)
	}
	if len(p) == 2 && p[1] == ':' {
		p += `\`
	}
	return p
}

func key(p string) string { return strings.ToLower(cleanPath(p)) }

func parent(p string) string {
	p = cleanPath(p)
	i := strings.LastIndex(p, `\`)
	if i < 0 {
		return ""
	}
	if i == 2 {
		return p[:3]
	}
	return p[:i]
}

func base(p string) string {
	p = cleanPath(p)
	return p[strings.LastIndex(p, `\`)+1:]
}

func join(dir, name string) string { return cleanPath(dir + `\` + name) }

func (f *fsys) isDir(p string) bool { _, ok := f.dirs[key(p)]; return ok }

func (f *fsys) file(p string) *File { return f.files[key(p)] }

func (f *fsys) exists(p string) bool { return f.isDir(p) || f.file(p) != nil }

func (f *fsys) mkdirAll(p string) {
	for p = cleanPath(p); p != ""; p = parent(p) {
		if f.isDir(p) {
			return
		}
		f.dirs[key(p)] = p
		delete(f.acls, key(p)) // a new directory inherits (acl)
		if len(p) <= 3 {
			return
		}
	}
}

// denied is Windows' answer to a write of a read-only file
// (UnauthorizedAccessException's message, as PowerShell shows it).
func denied(p string) error {
	return nonTerminating{fmt.Sprintf("Access to the path '%s' is denied.", p)}
}

// write writes a file; force overrides the read-only attribute, as
// Set-Content -Force and Copy-Item -Force do.
func (f *fsys) write(p string, data []byte, force bool) error {
	p = cleanPath(p)
	if f.isDir(p) {
		return nonTerminating{fmt.Sprintf("Access to the path '%s' is denied.", p)}
	}
	if !f.isDir(parent(p)) {
		return nonTerminating{fmt.Sprintf("Could not find a part of the path '%s'.", p)}
	}
	old := f.file(p)
	if old != nil && old.ReadOnly && !force {
		return denied(p)
	}
	f.files[key(p)] = &File{Path: p, Data: data}
	if old == nil {
		// A new file inherits from its directory; one overwritten keeps
		// its security descriptor (CreateFileW, CREATE_ALWAYS, Remarks).
		f.acls[key(p)] = inherit(f.acl(parent(p)), false, f.owner)
	}
	return nil
}

// copyFile is CopyFile: the copy keeps the source's attributes, the
// read-only one included ("CopyFile function (winbase.h)", Remarks).
func (f *fsys) copyFile(src, dst string, force bool) error {
	s := f.file(src)
	if s == nil {
		return nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", src)}
	}
	if err := f.write(dst, append([]byte(nil), s.Data...), force); err != nil {
		return err
	}
	f.file(dst).ReadOnly = s.ReadOnly
	return nil
}

// copyTree copies the directory src to dst (which it makes).
func (f *fsys) copyTree(src, dst string, force bool) error {
	f.mkdirAll(dst)
	for _, child := range f.children(src) {
		target := join(dst, base(child))
		var err error
		if f.isDir(child) {
			err = f.copyTree(child, target, force)
		} else {
			err = f.copyFile(child, target, force)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// children are the paths directly in dir, sorted.
func (f *fsys) children(dir string) []string {
	prefix := key(dir)
	if !strings.HasSuffix(prefix, `\`) {
		prefix += `\`
	}
	var out []string
	add := func(k, p string) {
		if strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], `\`) && k != prefix {
			out = append(out, p)
		}
	}
	for k, p := range f.dirs {
		add(k, p)
	}
	for k, file := range f.files {
		add(k, file.Path)
	}
	sort.Strings(out)
	return out
}

// glob resolves a path whose last element may hold wildcards.
func (f *fsys) glob(p string) []string {
	p = cleanPath(p)
	if !strings.ContainsAny(base(p), "*?") {
		if f.exists(p) {
			return []string{p}
		}
		return nil
	}
	re := wildcard(base(p))
	var out []string
	for _, c := range f.children(parent(p)) {
		if re.MatchString(base(c)) {
			out = append(out, c)
		}
	}
	return out
}

// remove deletes p; a read-only file needs force (Remove-Item -Force).
func (f *fsys) remove(p string, recurse, force bool) error {
	if file := f.file(p); file != nil {
		if file.ReadOnly && !force {
			return nonTerminating{fmt.Sprintf("Cannot remove item %s: You do not have sufficient access rights to perform this operation.", file.Path)}
		}
		delete(f.files, key(p))
		delete(f.acls, key(p))
		return nil
	}
	if !f.isDir(p) {
		return nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", cleanPath(p))}
	}
	kids := f.children(p)
	if len(kids) > 0 && !recurse {
		return nonTerminating{fmt.Sprintf("The item at %s has children and the Recurse parameter was not specified.", cleanPath(p))}
	}
	for _, c := range kids {
		if err := f.remove(c, true, force); err != nil {
			return err
		}
	}
	delete(f.dirs, key(p))
	delete(f.acls, key(p))
	return nil
}

func (f *fsys) setReadOnly(p string, ro bool) error {
	file := f.file(p)
	if file == nil {
		return fmt.Errorf("no file %s", p)
	}
	file.ReadOnly = ro
	return nil
}

// walk lists every file under dir.
func (f *fsys) walk(dir string) []*File {
	prefix := key(dir)
	if !strings.HasSuffix(prefix, `\`) {
		prefix += `\`
	}
	var out []*File
	for k, file := range f.files {
		if strings.HasPrefix(k, prefix) {
			out = append(out, file)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// fileItem is a FileInfo or DirectoryInfo PowerShell hands out.
type fileItem struct {
	fs   *fsys
	path string
}

func (i *fileItem) property(name string) any {
	switch strings.ToLower(name) {
	case "name":
		return base(i.path)
	case "fullname":
		return i.path
	case "isreadonly":
		if f := i.fs.file(i.path); f != nil {
			return f.ReadOnly
		}
		return false
	case "length":
		if f := i.fs.file(i.path); f != nil {
			return len(f.Data)
		}
	case "psiscontainer":
		return i.fs.isDir(i.path)
	}
	return nil
}
