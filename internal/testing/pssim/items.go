package pssim

import (
	"fmt"
	"strings"
)

// paths are the cmdlet's -LiteralPath, -Path or first argument, with
// -Path's wildcards resolved.
func (m *Machine) paths(c *call) []string {
	var out []string
	if c.Has("LiteralPath") {
		for _, p := range asList(c.Arg("LiteralPath")) {
			out = append(out, cleanPath(str(p)))
		}
		return out
	}
	var raw []any
	if c.Has("Path") {
		raw = asList(c.Arg("Path"))
	} else {
		raw = asList(c.Pos(0))
	}
	for _, p := range raw {
		s := cleanPath(str(p))
		if strings.ContainsAny(base(s), "*?") {
			out = append(out, m.fs.glob(s)...)
		} else {
			out = append(out, s)
		}
	}
	return out
}

func isRegistry(p string) bool { return strings.HasPrefix(strings.ToUpper(p), "HKLM:") }

func (m *Machine) newItem(c *call) (any, error) {
	var made []any
	for _, p := range m.paths(c) {
		switch {
		case isRegistry(p):
			if !m.keyExists(parent(p)) {
				return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", parent(p))}
			}
			if m.keyExists(p) {
				if !c.Switch("Force") {
					return nil, nonTerminating{"A key at this path already exists."}
				}
				// RegistryProvider.NewItem: with -Force an existing key is
				// removed before the new one is made.
				for k := range m.Registry {
					if k == key(p) || strings.HasPrefix(k, key(p)+`\`) {
						delete(m.Registry, k)
					}
				}
			}
			m.Registry[key(p)] = map[string]any{}
		case strings.EqualFold(c.Str("ItemType"), "Directory"):
			if m.fs.file(p) != nil {
				return nil, nonTerminating{fmt.Sprintf("An item with the specified name %s already exists.", p)}
			}
			if m.fs.isDir(p) && !c.Switch("Force") {
				return nil, nonTerminating{fmt.Sprintf("An item with the specified name %s already exists.", p)}
			}
			m.fs.mkdirAll(p)
			made = append(made, &fileItem{m.fs, p})
		default:
			if err := m.fs.write(p, []byte(c.Str("Value")), c.Switch("Force")); err != nil {
				return nil, err
			}
			made = append(made, &fileItem{m.fs, p})
		}
	}
	return unwrap(made), nil
}

// keyExists: the key, or a key under it, is in the registry (the model
// holds keys with values; their parents exist too), or it is the hive.
func (m *Machine) keyExists(p string) bool {
	k := strings.TrimRight(key(p), `\:`)
	if k == "hklm" {
		return true
	}
	for have := range m.Registry {
		if have == k || strings.HasPrefix(have, k+`\`) {
			return true
		}
	}
	return false
}

func (m *Machine) newItemProperty(c *call) (any, error) {
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if !ok {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		name := c.Str("Name")
		if _, exists := k[name]; exists && !c.Switch("Force") {
			return nil, nonTerminating{"The property already exists."}
		}
		k[name] = c.Arg("Value")
	}
	return nil, nil
}

func (m *Machine) getItemProperty(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if !ok {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		o := newObject("PSCustomObject")
		for name, v := range k {
			o.set(name, v)
		}
		out = append(out, o)
	}
	return unwrap(out), nil
}

func (m *Machine) removeItemProperty(c *call) (any, error) {
	for _, p := range m.paths(c) {
		k, ok := m.Registry[key(p)]
		if _, has := k[c.Str("Name")]; !ok || !has {
			return nil, nonTerminating{fmt.Sprintf("Property %s does not exist at path %s.", c.Str("Name"), p)}
		}
		delete(k, c.Str("Name"))
	}
	return nil, nil
}

// RegistryValue is a registry value, or nil.
func (m *Machine) RegistryValue(path, name string) any { return m.Registry[key(path)][name] }

// copyItem is Copy-Item: a file copies as CopyFile does; a directory
// with -Recurse copies into an existing destination directory, or
// becomes the destination.
func (m *Machine) copyItem(c *call) (any, error) {
	srcs := m.paths(c)
	if len(srcs) == 0 {
		return nil, nonTerminating{"Cannot find path because it does not exist."}
	}
	dst := cleanPath(c.Str("Destination"))
	force := c.Switch("Force")
	for _, src := range srcs {
		if !m.fs.exists(src) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", src)}
		}
		target := dst
		if m.fs.isDir(dst) {
			target = join(dst, base(src))
		}
		if m.fs.isDir(src) {
			if !c.Switch("Recurse") {
				m.fs.mkdirAll(target)
				continue
			}
			if err := m.fs.copyTree(src, target, force); err != nil {
				return nil, err
			}
			continue
		}
		if err := m.fs.copyFile(src, target, force); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (m *Machine) setContent(c *call) (any, error) {
	v := c.Arg("Value")
	if !c.Has("Value") {
		v = unwrap(c.input)
	}
	text := str(v)
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, x := range list {
			parts[i] = str(x)
		}
		text = strings.Join(parts, "\r\n")
	}
	for _, p := range m.paths(c) {
		if err := m.fs.write(p, []byte(text+"\r\n"), c.Switch("Force")); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (m *Machine) getContent(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		f := m.fs.file(p)
		if f == nil {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		if c.Switch("Raw") {
			out = append(out, string(f.Data))
			continue
		}
		lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(f.Data), "\r\n", "\n"), "\n"), "\n")
		if c.Has("Tail") && toInt(c.Arg("Tail")) < len(lines) {
			lines = lines[len(lines)-toInt(c.Arg("Tail")):]
		}
		for _, l := range lines {
			out = append(out, l)
		}
	}
	return unwrap(out), nil
}

func (m *Machine) removeItem(c *call) (any, error) {
	paths := m.paths(c)
	for _, p := range paths {
		if isRegistry(p) {
			delete(m.Registry, key(p))
			continue
		}
		if err := m.fs.remove(p, c.Switch("Recurse"), c.Switch("Force")); err != nil {
			return nil, err
		}
	}
	if len(paths) == 0 && c.Has("LiteralPath") {
		return nil, nonTerminating{"Cannot find path because it does not exist."}
	}
	return nil, nil
}

func (m *Machine) testPath(c *call) (any, error) {
	paths := m.paths(c)
	if len(paths) == 0 {
		return false, nil
	}
	if isRegistry(paths[0]) {
		return m.keyExists(paths[0]), nil
	}
	return m.fs.exists(paths[0]), nil
}

func (m *Machine) getChildItem(c *call) (any, error) {
	var out []any
	for _, dir := range m.paths(c) {
		if !m.fs.isDir(dir) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", dir)}
		}
		var list []string
		if c.Switch("Recurse") {
			for _, f := range m.fs.walk(dir) {
				list = append(list, f.Path)
			}
		} else {
			list = m.fs.children(dir)
		}
		filter := c.Str("Filter")
		for _, p := range list {
			if c.Switch("File") && m.fs.isDir(p) {
				continue
			}
			if filter != "" && !wildcard(filter).MatchString(base(p)) {
				continue
			}
			out = append(out, &fileItem{m.fs, p})
		}
	}
	return unwrap(out), nil
}

func (m *Machine) getItem(c *call) (any, error) {
	var out []any
	for _, p := range m.paths(c) {
		if !m.fs.exists(p) {
			return nil, nonTerminating{fmt.Sprintf("Cannot find path '%s' because it does not exist.", p)}
		}
		out = append(out, &fileItem{m.fs, p})
	}
	return unwrap(out), nil
}
