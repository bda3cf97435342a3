package config

// Value returns the setting's value in c as `config check` and GET
// /admin/v1/config print it: strings quoted, lists in brackets, and a
// secret as "[redacted]" (or "" when it is empty), so that nothing it
// returns reveals a secret.
func (s Setting) Value(c *Config) string { return s.format(c) }

// Change is one setting whose value differs between a running gateway's
// configuration and a candidate one.
type Change struct {
	Key string
	// Running and Candidate are the two values as Value prints them.
	Running, Candidate string
	// Reload says the change applies at a reload (SIGHUP, POST
	// /admin/v1/reload); otherwise it needs a restart.
	Reload bool
	// Secret says the setting is secret: its values show only whether it
	// is set, so a changed secret of the same shape is not seen.
	Secret bool
}

// Diff returns the settings, in the table's order, whose value in
// candidate differs from running's (keys to values as Value prints them;
// a key running does not name is taken as not differing, since an older
// gateway may not know a newer setting), each marked with whether a
// reload applies it. Secrets are compared only as Value prints them,
// redacted: whether they are set, and the rest of a credential (access
// key, principal); a rotated secret value does not show.
func Diff(running map[string]string, candidate *Config) []Change {
	var out []Change
	for _, s := range Settings() {
		r, ok := running[s.Key]
		if !ok {
			continue
		}
		v := s.Value(candidate)
		if r == v {
			continue
		}
		reload := s.Reloadable
		if s.toggle && (r == `""`) != (v == `""`) {
			reload = false
		}
		out = append(out, Change{Key: s.Key, Running: r, Candidate: v, Reload: reload, Secret: s.Secret})
	}
	return out
}
