package config

import "reflect"

// RestartNeeded returns the keys of the settings, in the table's order,
// whose values differ between old and new and that a reload does not
// apply (Setting.Reloadable is false): the changes that wait for a
// restart.
func RestartNeeded(old, new *Config) []string {
	var keys []string
	for _, s := range Settings() {
		if s.Reloadable {
			continue
		}
		if !reflect.DeepEqual(s.field(old), s.field(new)) {
			keys = append(keys, s.Key)
		}
	}
	return keys
}
