package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// normalize fills values derived from other settings and puts
// case-insensitive ones in one case, so that the rest of the program sees
// one spelling.
func (c *Config) normalize() {
	if c.Region == "" {
		c.Region = c.Backend.Region
	}
	for i, d := range c.Domains {
		c.Domains[i] = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	}
	for i := range c.Credentials {
		if c.Credentials[i].Principal == "" {
			c.Credentials[i].Principal = c.Credentials[i].AccessKey
		}
	}
	c.Log.Format = strings.ToLower(c.Log.Format)
	c.Log.Level = strings.ToLower(c.Log.Level)
	if c.Etcd.Prefix != "" && !strings.HasSuffix(c.Etcd.Prefix, "/") {
		c.Etcd.Prefix += "/"
	}
	for i, h := range c.Admin.Hosts {
		c.Admin.Hosts[i] = NormalizeHost(h)
	}
}

// Validate reports every problem in c at once, each naming the setting, so
// that one run shows everything to fix.
func (c *Config) Validate() error {
	errs := c.validateListeners()
	errs = append(errs, c.validateBackend()...)
	errs = append(errs, c.validateLimits()...)
	errs = append(errs, c.validateCredentials()...)
	errs = append(errs, c.validateIdentities()...)
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}

	for _, ep := range c.Etcd.Endpoints {
		if err := checkEtcdEndpoint(ep); err != nil {
			bad("etcd.endpoints", "%q: %v", ep, err)
		}
	}
	if _, err := etcdstore.NewKeys(c.Etcd.Prefix); err != nil {
		bad("etcd.prefix", "%v", err)
	}
	if c.Etcd.RequestTimeout <= 0 {
		bad("etcd.request_timeout", "must be positive, got %s", c.Etcd.RequestTimeout)
	}
	if c.Etcd.DialTimeout <= 0 {
		bad("etcd.dial_timeout", "must be positive, got %s", c.Etcd.DialTimeout)
	}
	if c.UsesEmbeddedEtcd() {
		errs = append(errs, c.validateEmbedded()...)
	}
	errs = append(errs, c.validateEtcdSecurity()...)
	errs = append(errs, c.validateShards()...)

	errs = append(errs, c.validateReclaim()...)
	errs = append(errs, c.validateDigests()...)
	errs = append(errs, c.validateAdmin()...)
	errs = append(errs, c.validateAdminTLS()...)
	errs = append(errs, c.validateTracing()...)

	if c.Shutdown.DrainDelay < 0 {
		bad("shutdown.drain_delay", "must not be negative, got %s", c.Shutdown.DrainDelay)
	}
	if c.Shutdown.Timeout <= 0 {
		bad("shutdown.timeout", "must be positive, got %s", c.Shutdown.Timeout)
	}

	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q: must be text or json", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: must be debug, info, warn or error", c.Log.Level)
	}
	return errors.Join(errs...)
}

// validateListeners checks the S3 and admin listeners' addresses and TLS
// files.
func (c *Config) validateListeners() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	checkAddr := func(key, addr string) {
		if addr == "" {
			return
		}
		if err := checkListenAddr(addr); err != nil {
			bad(key, "%q: %v", addr, err)
		}
	}

	if c.Listen == "" && c.TLSListen == "" {
		bad("listen", "nothing to serve: set listen, tls_listen or both")
	}
	checkAddr("listen", c.Listen)
	checkAddr("tls_listen", c.TLSListen)
	if c.TLSListen != "" {
		if c.TLSCertFile == "" {
			bad("tls_cert_file", "required when tls_listen is set")
		}
		if c.TLSKeyFile == "" {
			bad("tls_key_file", "required when tls_listen is set")
		}
	} else if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		bad("tls_listen", "tls_cert_file or tls_key_file is set but tls_listen is empty, so HTTPS would be off")
	}
	if fixedAddr(c.Listen) && c.Listen == c.TLSListen {
		bad("tls_listen", "same address as listen")
	}
	checkAddr("admin.listen", c.Admin.Listen)
	if fixedAddr(c.Admin.Listen) && (c.Admin.Listen == c.Listen || c.Admin.Listen == c.TLSListen) {
		bad("admin.listen", "same address as the S3 listener; metrics and probes need their own")
	}
	return errs
}

// validateBackend checks the region and domains clients use and the
// backend's endpoint, region and key.
func (c *Config) validateBackend() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	if c.Region != "" {
		if err := checkRegion(c.Region); err != nil {
			bad("region", "%q: %v", c.Region, err)
		}
	}
	for _, d := range c.Domains {
		if err := checkDomain(d); err != nil {
			bad("domains", "%q: %v", d, err)
		}
	}

	if c.Backend.Endpoint == "" {
		bad("backend.endpoint", "required: the URL of the S3 server behind the gateway, such as http://127.0.0.1:9100")
	} else if err := checkEndpoint(c.Backend.Endpoint); err != nil {
		bad("backend.endpoint", "%q: %v", c.Backend.Endpoint, err)
	}
	if c.Backend.CAFile != "" {
		if !strings.HasPrefix(c.Backend.Endpoint, "https://") {
			bad("backend.ca_file", "applies to an https:// backend.endpoint")
		} else if _, err := c.BackendRootCAs(); err != nil {
			bad("backend.ca_file", "%v", err)
		}
	}
	if c.Backend.Region == "" {
		bad("backend.region", "required")
	} else if err := checkRegion(c.Backend.Region); err != nil {
		bad("backend.region", "%q: %v", c.Backend.Region, err)
	}
	if c.Backend.AccessKey == "" {
		bad("backend.access_key", "required")
	} else if err := checkAccessKey(c.Backend.AccessKey); err != nil {
		bad("backend.access_key", "%v", err)
	}
	if c.Backend.SecretKey == "" && c.Backend.SecretKeyFile == "" {
		bad("backend.secret_key", "required (or backend.secret_key_file)")
	}
	return errs
}

// validateCredentials checks the client credentials and the clock skew
// their signatures may have.
func (c *Config) validateCredentials() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	seen := make(map[string]bool)
	for i, cr := range c.Credentials {
		switch {
		case cr.AccessKey == "":
			bad("credentials", "entry %d: access key is empty", i+1)
		case checkAccessKey(cr.AccessKey) != nil:
			bad("credentials", "entry %d: %v", i+1, checkAccessKey(cr.AccessKey))
		case seen[cr.AccessKey]:
			bad("credentials", "access key %q is listed twice", cr.AccessKey)
		}
		seen[cr.AccessKey] = true
		if cr.SecretKey == "" {
			bad("credentials", "entry %d (%s): secret key is empty", i+1, cr.AccessKey)
		}
	}
	if len(c.Credentials) == 0 && !c.AcceptBackendCredentials {
		bad("credentials", "no client could sign in: list credentials or turn accept_backend_credentials on")
	}
	if c.MaxClockSkew <= 0 {
		bad("max_clock_skew", "must be positive, got %s", c.MaxClockSkew)
	}
	return errs
}

// validateEmbedded checks the embedded etcd settings; they are ignored, and
// so not checked, when an external cluster is configured.
func (c *Config) validateEmbedded() []error {
	var errs []error
	e := c.Etcd.Embedded
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	if e.DataDir == "" {
		bad("etcd.embedded.data_dir", "required when etcd.endpoints is empty")
	}
	if err := etcdstore.CheckBindURL(e.ClientURL); err != nil {
		bad("etcd.embedded.client_url", "%v", err)
	}
	if err := etcdstore.CheckBindURL(e.PeerURL); err != nil {
		bad("etcd.embedded.peer_url", "%v", err)
	}
	if e.ClientURL == e.PeerURL && !strings.HasSuffix(e.ClientURL, ":0") {
		bad("etcd.embedded.peer_url", "same as etcd.embedded.client_url")
	}
	switch e.AutoCompactionMode {
	case "periodic", "revision":
		if err := etcdstore.CheckAutoCompaction(e.AutoCompactionMode, e.AutoCompactionRetention); err != nil {
			bad("etcd.embedded.auto_compaction_retention", "%v", err)
		}
	default:
		bad("etcd.embedded.auto_compaction_mode", "%q: must be periodic or revision", e.AutoCompactionMode)
	}
	if e.QuotaBackendBytes < 0 {
		bad("etcd.embedded.quota_backend_bytes", "must not be negative")
	}
	return errs
}

// Limits of the reclaimer's counts.
const (
	// maxReclaimBatch is the most uploads S3 lists in one request.
	maxReclaimBatch = 1000
	// maxReclaimParallel keeps a pass from flooding the backend and etcd.
	maxReclaimParallel = 256
)

// validateReclaim checks the reclaimer settings. They are checked even when
// reclaim.enabled is off: such a replica still answers plans with them.
func (c *Config) validateReclaim() []error {
	var errs []error
	r := c.Reclaim
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"reclaim.grace", r.Grace},
		{"reclaim.delete_after", r.DeleteAfter},
		{"reclaim.stuck_limit", r.StuckLimit},
		{"reclaim.clock_skew", r.ClockSkew},
		{"reclaim.interval", r.Interval},
		{"reclaim.backend_timeout", r.BackendTimeout},
	} {
		if d.v <= 0 {
			bad(d.key, "must be positive, got %s", d.v)
		}
	}
	switch {
	case r.ElectionTTL < time.Second:
		bad("reclaim.election_ttl", "must be at least 1s (an etcd lease lives whole seconds), got %s", r.ElectionTTL)
	case r.ElectionTTL%time.Second != 0:
		bad("reclaim.election_ttl", "must be whole seconds (an etcd lease lives whole seconds), such as 15s; got %s", r.ElectionTTL)
	}
	checkCeiling(bad, "reclaim.max_delete", "parts", r.MaxDelete, r.MaxDeleteFraction)
	checkCeiling(bad, "reclaim.max_delete_uploads", "uploads", r.MaxDeleteUploads, r.MaxDeleteUploadsFraction)
	checkCeiling(bad, "reclaim.max_mark", "uploads", r.MaxMark, r.MaxMarkFraction)
	if r.BatchSize < 1 || r.BatchSize > maxReclaimBatch {
		bad("reclaim.batch_size", "must be 1 to %d (S3 lists at most %d uploads at a time), got %d", maxReclaimBatch, maxReclaimBatch, r.BatchSize)
	}
	if r.Parallel < 1 || r.Parallel > maxReclaimParallel {
		bad("reclaim.parallel", "must be 1 to %d, got %d", maxReclaimParallel, r.Parallel)
	}
	if r.MissingCheckBudget < 1 {
		bad("reclaim.missing_check_budget", "must be 1 or more, got %d", r.MissingCheckBudget)
	}
	if r.PassUploads < 0 {
		bad("reclaim.pass_uploads", "must not be negative (0 lists every upload in every pass), got %d", r.PassUploads)
	}
	return errs
}

// validateDigests checks the digest reclamation settings. They are
// checked even when no namespace is configured, so that a mistake shows
// before the day digest reclamation is turned on.
func (c *Config) validateDigests() []error {
	_, errs := c.buildLayout()
	d := c.Digests
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	if len(d.Namespaces) > 0 && len(d.Sources) == 0 {
		// Nothing could reference a blob, so every blob would look
		// unreferenced: a configuration mistake, not an intent.
		bad("digests.sources", "empty while digests.namespaces is set: every blob would count as unreferenced; name the reference sources that keep blobs")
	}
	if (len(d.Namespaces) > 0 || len(d.Sources) > 0 || d.Preset != "") && !c.Sessions.Enabled {
		bad("digests.namespaces", "digest reclamation needs sessions.enabled: its records live in etcd next to the sessions, and in-flight multipart uploads into a namespace are placements")
	}
	if d.MaxBody < 1 {
		bad("digests.max_body", "must be 1 byte or more, got %d", d.MaxBody)
	}
	for _, dur := range []struct {
		key string
		v   time.Duration
	}{
		{"digests.trash_window", d.TrashWindow},
		{"digests.placement_grace", d.PlacementGrace},
		{"digests.tombstone_retention", d.TombstoneRetention},
	} {
		if dur.v <= 0 {
			bad(dur.key, "must be positive, got %s", dur.v)
		}
	}
	if floor := c.Reclaim.BackendTimeout + c.Reclaim.ElectionTTL; d.GuardSettle <= floor {
		bad("digests.guard_settle", "must be longer than reclaim.backend_timeout + reclaim.election_ttl (%s), so that a delete the backend executes late still finds its guard; got %s", floor, d.GuardSettle)
	}
	if d.DeleteParallel < 1 {
		bad("digests.delete_parallel", "must be at least 1, got %d", d.DeleteParallel)
	}
	if d.PassBlobs != 0 && d.PassBlobs < c.Reclaim.BatchSize {
		bad("digests.pass_blobs", "must be 0 (every namespace in every pass) or at least reclaim.batch_size (%d): a pass lists whole pages; got %d", c.Reclaim.BatchSize, d.PassBlobs)
	}
	if d.RebuildInterval < 0 {
		bad("digests.rebuild_interval", "must not be negative (0 rebuilds before every pass), got %s", d.RebuildInterval)
	}
	seen := make(map[string]bool)
	for i, p := range d.Planes {
		if err := CheckPlane(p); err != nil {
			bad("digests.planes", "entry %d %q: %v", i+1, p, err)
		} else if seen[p] {
			bad("digests.planes", "plane %q is listed twice", p)
		}
		seen[p] = true
	}
	checkCeiling(bad, "digests.max_delete", "blobs", d.MaxDelete, d.MaxDeleteFraction)
	checkCeiling(bad, "digests.max_mark", "blobs", d.MaxMark, d.MaxMarkFraction)
	return errs
}

// checkCeiling checks one breaker ceiling: the count setting name (-1 or
// at least 1, in unit) and its fraction, name+"_fraction".
func checkCeiling(bad func(string, string, ...any), name, unit string, limit int64, frac float64) {
	switch {
	case limit == 0:
		bad(name, "0 is not a limit: set reclaim.dry_run to delete nothing, or -1 for no absolute limit")
	case limit < -1:
		bad(name, "must be a number of %s (1 or more), or -1 for no absolute limit; got %d", unit, limit)
	}
	if !(frac > 0 && frac <= 1) {
		bad(name+"_fraction", "must be greater than 0 and at most 1 (0.25 is a quarter of the stored %s), got %g", unit, frac)
	}
}

// buildLayout compiles the namespaces and sources and reports every
// problem, each naming its setting and entry.
func (c *Config) buildLayout() (*cas.Layout, []error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", describe(key), fmt.Sprintf(format, args...)))
	}
	// Names label reports and logs, so two places must not share one.
	names := make(map[string]bool)
	named := func(key, where, name string) {
		if name == "" {
			return // the default name, bucket/prefix, is unique unless the places overlap, which Validate says
		}
		if names[name] {
			bad(key, "%s: the name %q is used twice", where, name)
		}
		names[name] = true
	}
	l := &cas.Layout{}
	for i, n := range c.Digests.Namespaces {
		const key = "digests.namespaces"
		where := fmt.Sprintf("entry %d (%s/%s)", i+1, n.Bucket, n.Prefix)
		if err := checkBucket(n.Bucket); err != nil {
			bad(key, "%s: %v", where, err)
			continue
		}
		verify := c.Digests.Verify
		if n.Verify != nil {
			verify = *n.Verify
		}
		ns, err := cas.NewNamespace(n.Name, n.Bucket, n.Prefix, n.Pattern, verify)
		ns.Content = n.Content
		ns.ConfirmBlobs = n.ConfirmBlobs
		if err != nil {
			bad(key, "%s: %v", where, err)
			continue
		}
		named(key, where, n.Name)
		l.Namespaces = append(l.Namespaces, ns)
	}
	for i, s := range c.Digests.Sources {
		const key = "digests.sources"
		where := fmt.Sprintf("entry %d (%s/%s)", i+1, s.Bucket, s.Prefix)
		if err := checkBucket(s.Bucket); err != nil {
			bad(key, "%s: %v", where, err)
			continue
		}
		maxBody := c.Digests.MaxBody
		switch {
		case s.MaxBody < 0:
			bad(key, "%s: max_body must be 1 byte or more (or 0 for digests.max_body), got %d", where, s.MaxBody)
			continue
		case s.MaxBody > 0:
			maxBody = s.MaxBody
		}
		src, err := cas.NewSource(s.Name, s.Bucket, s.Prefix, s.Pattern, maxBody)
		if err == nil {
			err = src.SetKeys(s.Keys)
		}
		if s.Kind != "" {
			src.Kind = s.Kind
		}
		src.ConfirmBlobs = s.ConfirmBlobs
		if err != nil {
			bad(key, "%s: %v", where, err)
			continue
		}
		named(key, where, s.Name)
		l.Sources = append(l.Sources, src)
	}
	errs = append(errs, c.addPreset(l)...)
	if len(errs) > 0 {
		return nil, errs
	}
	if err := l.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("digests.namespaces and digests.sources (with digests.preset): %w", err))
		return nil, errs
	}
	return l, nil
}

// checkBucket refuses what cannot be an S3 bucket name in a path-style
// request: a bucket holding '/' would never match a key.
func checkBucket(b string) error {
	switch {
	case b == "":
		return errors.New("the bucket is empty (want BUCKET/PREFIX, or bucket: in YAML)")
	case strings.ContainsAny(b, "/ \t\r\n"):
		return fmt.Errorf("bucket %q must not contain '/' or spaces", b)
	}
	return nil
}

// maxPlaneName bounds a plane's name, which is an etcd key segment and a
// column in 'sweepgate frontier list'.
const maxPlaneName = 128

// CheckPlane refuses a replica or backup plane name that could not be one
// path segment of the admin API (/admin/v1/frontiers/{plane}) or one cell
// of a table. The admin API checks reported planes with it too, so that a
// plane can always be configured under the name it reports.
func CheckPlane(name string) error {
	switch {
	case name == "":
		return errors.New("a plane needs a name")
	case len(name) > maxPlaneName:
		return fmt.Errorf("a plane name has at most %d bytes", maxPlaneName)
	case strings.Contains(name, "/"):
		return errors.New("a plane name must not contain '/'")
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errors.New("a plane name must not contain spaces or control characters")
	}
	return nil
}

// describe names a setting with all its spellings, so that an error makes
// sense whichever source the user set it in.
func describe(key string) string {
	for _, s := range Settings() {
		if s.Key == key {
			return fmt.Sprintf("%s (--%s, %s)", s.Key, s.Flag, s.Env)
		}
	}
	return key
}

// fixedAddr reports whether addr names one port; port 0 picks a new free
// port for each listener, so two of them never collide.
func fixedAddr(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != "0"
}

func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, such as :9000 or 127.0.0.1:9000")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkRegion refuses what cannot appear in a SigV4 credential scope, whose
// parts are separated by '/'.
func checkRegion(r string) error {
	if strings.ContainsAny(r, "/ \t\r\n") {
		return errors.New("must not contain '/' or spaces")
	}
	return nil
}

// checkAccessKey refuses what would make a SigV4 Credential parameter
// (ACCESS_KEY/DATE/REGION/s3/aws4_request) ambiguous, or a credentials list
// impossible to write.
func checkAccessKey(ak string) error {
	if strings.ContainsAny(ak, "/:, \t\r\n") {
		return fmt.Errorf("access key %q must not contain '/', ':', ',' or spaces", ak)
	}
	return nil
}

func checkDomain(d string) error {
	if d == "" {
		return errors.New("empty domain")
	}
	if strings.Contains(d, "://") {
		return errors.New("a domain name only, without a scheme")
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a domain name")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return errors.New("a domain name has only letters, digits, '-' and '.' (no port, no path)")
			}
		}
	}
	return nil
}

func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if u.User != nil {
		return errors.New("must not carry credentials; use backend.access_key and backend.secret_key")
	}
	if u.Path != "" && u.Path != "/" {
		// Requests are re-signed for the backend's own paths; a base path
		// would change every canonical request.
		return errors.New("must not have a path")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must not have a query or fragment")
	}
	return nil
}
