package adminapi

// CodeReloadFailed says a reload found a configuration it could not apply;
// the process keeps the values it had, and the message says why.
const CodeReloadFailed = "reload_failed"

// ReloadResult answers POST /admin/v1/reload: the reloadable settings (the
// client credentials, the backend's keys, the S3 TLS certificate) were
// read again and are now in effect.
type ReloadResult struct {
	// RestartNeeded lists the settings whose new values were read but take
	// effect only at the next restart.
	RestartNeeded []string `json:"restart_needed"`
}
