package adminapi

// ConfigDoc answers GET /admin/v1/config: every setting of the
// configuration the process runs on (that of its start, with the reloads
// since applied), in the order of docs/configuration.md.
type ConfigDoc struct {
	Settings []ConfigSetting `json:"settings"`
}

// ConfigSetting is one setting's value. A secret's value is "[redacted]",
// or "" when it is not set, and a credential shows its access key and
// principal only: nothing in the document reveals a secret.
type ConfigSetting struct {
	Key string `json:"key"`
	// Value is the value as `sweepgate config check` prints it: strings
	// quoted, lists in brackets, durations like 1m30s.
	Value string `json:"value"`
	// Reloadable settings take effect at a reload; the others at a
	// restart.
	Reloadable bool `json:"reloadable"`
	Secret     bool `json:"secret"`
}
