package adminapi

import "time"

// The digest reclamation documents: the frontiers that replica and backup
// planes report, and the trash of deleted reference objects.

// Frontiers answers GET /admin/v1/frontiers.
type Frontiers struct {
	// Revision is etcd's current revision, which lag is measured against.
	Revision int64   `json:"revision"`
	Planes   []Plane `json:"planes"`
}

// Plane is one plane's frontier: the etcd revision it has applied.
type Plane struct {
	Plane string `json:"plane"`
	// Revision is what the plane reported; 0 when it has not, which is
	// also what the digest sweep counts it as.
	Revision int64 `json:"revision"`
	// Lag is how many revisions the plane is behind etcd's current one.
	Lag        int64      `json:"lag"`
	ReportedAt *time.Time `json:"reported_at"`
	By         string     `json:"by"`
	// Configured says digests.planes lists the plane, so that it gates
	// every delete; a plane that reports without being listed gates
	// nothing.
	Configured bool `json:"configured"`
	Reported   bool `json:"reported"`
}

// TrashList answers GET /admin/v1/trash.
type TrashList struct {
	Trash []Trash `json:"trash"`
	// Truncated says more records match than the limit let through.
	Truncated bool `json:"truncated"`
}

// Trash is the trash record of one deleted reference object.
type Trash struct {
	Bucket  string   `json:"bucket"`
	Key     string   `json:"key"`
	Digests []string `json:"digests"`
	// DeletedAt names the record: a restore sends it back exactly.
	DeletedAt time.Time `json:"deleted_at"`
	Expires   time.Time `json:"expires"`
	Principal string    `json:"principal"`
	// Expired says the trash no longer retains the digests: the reclaimer
	// may collect blobs that nothing else names. The record stays
	// restorable until it is pruned.
	Expired bool `json:"expired"`
}

// Restored answers POST /admin/v1/trash/restore.
type Restored struct {
	Restored Trash `json:"restored"`
}

// FrontierReport is the document of POST /admin/v1/frontiers/{plane}.
type FrontierReport struct {
	// Revision is required; a pointer tells 0 from absent.
	Revision *int64 `json:"revision"`
	// By names the reporter (a job, a host); default: the client's
	// address.
	By string `json:"by"`
}

// RestoreRequest is the document of POST /admin/v1/trash/restore.
type RestoreRequest struct {
	Bucket    string     `json:"bucket"`
	Key       string     `json:"key"`
	DeletedAt *time.Time `json:"deleted_at"`
}
