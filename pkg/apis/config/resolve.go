package config

// Resolve turns a config file (or none, when path is empty) and flags into
// the effective config, in the documented order: built-in defaults fill
// what neither the file nor the flags set, and flags win over the file.
// The host picks the default driver. Problems come back as
// Errors, all of them at once; the config is returned only when valid.
func Resolve(path string, o Overrides, host Host) (*Cluster, error) {
	c := &Cluster{APIVersion: APIVersion, Kind: Kind}
	if path != "" {
		var err error
		if c, err = Load(path); err != nil {
			return nil, err
		}
	}
	if err := ApplyOverrides(c, o); err != nil {
		return nil, err
	}
	SetDefaults(c, host)
	if err := Validate(c); err != nil {
		return nil, err
	}
	return c, nil
}
