package config

import "reflect"

// RestartNeeded returns the keys of the settings, in the table's order,
// whose values differ between old and new and that a reload does not
// apply: those that are not Reloadable, and those that turn a listener's
// TLS on or off (admin.tls_cert_file and admin.tls_key_file going from
// empty to set, or back). These are the changes that wait for a restart.
func RestartNeeded(old, new *Config) []string {
	var keys []string
	for _, s := range Settings() {
		if s.Reloadable && !s.toggled(old, new) {
			continue
		}
		if !reflect.DeepEqual(s.field(old), s.field(new)) {
			keys = append(keys, s.Key)
		}
	}
	return keys
}

// toggled reports whether s is a setting whose change from empty to set,
// or back, waits for a restart, and that change is between old and new.
func (s Setting) toggled(old, new *Config) bool {
	if !s.toggle {
		return false
	}
	return reflect.ValueOf(s.field(old)).Elem().IsZero() != reflect.ValueOf(s.field(new)).Elem().IsZero()
}

// InEffect returns the configuration a process started with started runs
// on after a reload that read next: next's values of the settings a reload
// applies, started's of every other (those RestartNeeded names). Neither
// argument is changed; the result may share their lists, which nothing
// modifies once loaded.
func InEffect(started, next *Config) *Config {
	out := *started
	for _, s := range Settings() {
		if !s.Reloadable || s.toggled(started, next) {
			continue
		}
		reflect.ValueOf(s.field(&out)).Elem().Set(reflect.ValueOf(s.field(next)).Elem())
	}
	return &out
}
