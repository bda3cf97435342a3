package admin

// ReclaimerInfo describes this process's reclaimer for the admin API and
// the start-up line.
type ReclaimerInfo struct {
	// ID is what this process campaigns with: host name and admin address.
	ID string
	// Enabled says it campaigns (reclaim.enabled); a process that does not
	// still answers reads and plans.
	Enabled bool
	DryRun  bool
	// Off says why there is no reclaimer at all, when there is none.
	Off string
}

// Mode says in words whether and how the reclaimer runs.
func (i ReclaimerInfo) Mode() string {
	switch {
	case i.Off != "":
		return "off: " + i.Off
	case !i.Enabled:
		return "off: reclaim.enabled is false (answers reads and plans, never leads)"
	case i.DryRun:
		return "on, dry run (reclaim.dry_run: every pass is a plan)"
	}
	return "on"
}
