// Package config holds the configuration of `sweepgate serve`: its types,
// defaults, validation, and loading from flags, SWEEPGATE_* environment
// variables and a YAML file.
//
// One table (Settings) names every setting once and derives its flag,
// environment variable and YAML key from that name, so the three sources
// cannot drift apart and the help text and docs/configuration.md are
// generated from the same place.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// Config is the whole configuration of `sweepgate serve`. Load returns it
// filled with defaults, derived values and the user's settings, validated.
type Config struct {
	// Listen is the host:port for S3 clients over plain HTTP; empty turns
	// plain HTTP off.
	Listen string
	// TLSListen is the host:port for S3 clients over HTTPS; empty turns
	// HTTPS off.
	TLSListen   string
	TLSCertFile string
	TLSKeyFile  string
	// Region is the region clients sign for. Load sets it to Backend.Region
	// when it is not configured.
	Region string
	// Domains are the domain names under which BUCKET.DOMAIN addresses a
	// bucket (virtual-hosted-style requests), lowercase.
	Domains []string

	Backend Backend

	// Credentials are the client credentials configured explicitly. Use
	// ClientCredentials for the full table the gateway should accept.
	Credentials []Credential
	// CredentialsFile names a YAML file of more credentials; Load adds
	// them to Credentials.
	CredentialsFile string
	// AcceptBackendCredentials adds the backend's own key to the client
	// credentials, so that clients only change their endpoint.
	AcceptBackendCredentials bool
	// MaxClockSkew is how far a request's signing time may be from ours.
	MaxClockSkew time.Duration
	// TrustedProxies are the CIDR prefixes (or single addresses) of the
	// proxies whose X-Forwarded-For entries and PROXY headers are believed.
	TrustedProxies []string
	// ProxyProtocol makes the S3 listeners read a PROXY protocol header
	// from trusted proxies.
	ProxyProtocol bool
	// Limits bound the requests served at once and the wait for a body.
	Limits Limits

	Etcd     Etcd
	Sessions Sessions
	Reclaim  Reclaim
	Digests  Digests
	Admin    Admin
	Log      Log
	Shutdown Shutdown
	Tracing  Tracing
}

// Reclaim configures the elected reclaimer that marks and later deletes
// abandoned multipart uploads.
type Reclaim struct {
	// Enabled makes this process campaign for the reclaimer's lead.
	Enabled bool
	// DryRun makes every pass a plan that changes nothing.
	DryRun      bool
	Grace       time.Duration
	DeleteAfter time.Duration
	StuckLimit  time.Duration
	ClockSkew   time.Duration
	// MaxDelete is the breaker's ceiling in parts; -1 means none (the
	// fraction still applies).
	MaxDelete int64
	// MaxDeleteFraction is the breaker's ceiling as a share of all stored
	// parts, in (0, 1].
	MaxDeleteFraction float64
	// MaxDeleteUploads and MaxDeleteUploadsFraction are the breaker's
	// ceilings in uploads (sessions) deleted; MaxMark and MaxMarkFraction
	// in uploads marked.
	MaxDeleteUploads         int64
	MaxDeleteUploadsFraction float64
	MaxMark                  int64
	MaxMarkFraction          float64
	Interval                 time.Duration
	BatchSize                int64
	Parallel                 int64
	BackendTimeout           time.Duration
	ElectionTTL              time.Duration
	MissingCheckBudget       int64
	PassUploads              int64
	// BackendIdentity names the backend identity of the reclaimer, the
	// reconciler, the digest sweep and the readiness check.
	BackendIdentity string
	// Buckets are the buckets the reclaimer sweeps; empty means every
	// bucket the backend lists.
	Buckets []string
	// WitnessBucket and WitnessKey locate the backend's copy of the
	// restore witness (reclaim.Config.WitnessBucket); empty takes the
	// defaults that setting's help names.
	WitnessBucket string
	WitnessKey    string
}

// Digests configures digest reclamation (docs/digests.md): the
// content-addressed namespaces whose unreferenced blobs may be deleted, the
// reference sources whose objects keep blobs, and the gates a blob passes
// before its bytes go. Layout builds the namespaces and sources; with none
// configured digest reclamation is off.
type Digests struct {
	Namespaces []DigestNamespace
	Sources    []DigestSource
	// Preset names a layout (cas.Preset) added to the namespaces and
	// sources, for the storage at PresetStorage (BUCKET[/ROOT]).
	Preset        string
	PresetStorage string
	// Verify is the digest verification of namespaces that do not set
	// their own.
	Verify bool
	// MaxBody is the body limit of sources that do not set their own.
	MaxBody int64
	// TrashWindow is how long a deleted reference object's digests stay
	// retained (and restorable).
	TrashWindow time.Duration
	// PlacementGrace protects young blobs, whose manifest may not be
	// written yet.
	PlacementGrace time.Duration
	// Planes are the replica and backup planes whose reported frontier
	// gates every delete; one that has not reported counts as revision 0.
	Planes []string
	// MaxDelete is the breaker's ceiling in blobs; -1 means none (the
	// fraction still applies).
	MaxDelete         int64
	MaxDeleteFraction float64
	// MaxMark and MaxMarkFraction are the breaker's ceilings in blobs whose
	// tombstone a pass made pending.
	MaxMark         int64
	MaxMarkFraction float64
	// RebuildInterval spaces the rebuilds of the recorded references from
	// the backend; 0 rebuilds before every pass.
	RebuildInterval    time.Duration
	TombstoneRetention time.Duration
	// GuardSettle is how long after a delete's deadline its guard stays
	// armed, so that a delete the backend executes late finds no writer.
	GuardSettle time.Duration
	// DeleteParallel is how many DeleteObjects requests of the collector
	// are in flight at once.
	DeleteParallel int64
	// PassBlobs bounds the objects one digest pass lists; 0 lists all.
	PassBlobs int64
}

// DigestNamespace is one configured CAS namespace: a bucket prefix whose
// object keys carry the digest of their content. Empty fields take the
// defaults of cas.NewNamespace; a nil Verify takes Digests.Verify.
type DigestNamespace struct {
	Name    string
	Bucket  string
	Prefix  string
	Pattern string
	Verify  *bool
	// Content is cas.ContentManifests when the namespace's blobs may be
	// manifests that name further blobs, or empty.
	Content string
	// ConfirmBlobs refuses a manifest blob that names a blob not stored
	// (cas.Namespace.ConfirmBlobs).
	ConfirmBlobs bool
}

// DigestSource is one configured reference source: a bucket prefix whose
// objects name digests in their bodies. Empty fields take the defaults of
// cas.NewSource; a MaxBody of 0 takes Digests.MaxBody.
type DigestSource struct {
	Name    string
	Bucket  string
	Prefix  string
	Pattern string
	// Keys narrows the source to keys whose part after Prefix matches it.
	Keys    string
	MaxBody int64
	// Kind is cas.KindRoot (the default) or cas.KindCache.
	Kind string
	// ConfirmBlobs refuses a write that names a blob not stored
	// (cas.Source.ConfirmBlobs).
	ConfirmBlobs bool
}

// String writes the namespace as BUCKET/PREFIX, with the fields that the
// short form cannot say after it, so that a printed Config shows them.
func (n DigestNamespace) String() string {
	s := n.Bucket + "/" + n.Prefix
	var extra []string
	if n.Name != "" {
		extra = append(extra, "name="+n.Name)
	}
	if n.Pattern != "" {
		extra = append(extra, "pattern="+n.Pattern)
	}
	if n.Verify != nil {
		extra = append(extra, fmt.Sprintf("verify=%t", *n.Verify))
	}
	if n.Content != "" {
		extra = append(extra, "content="+n.Content)
	}
	if n.ConfirmBlobs {
		extra = append(extra, "confirm_blobs=true")
	}
	if len(extra) > 0 {
		s += "{" + strings.Join(extra, " ") + "}"
	}
	return s
}

// String writes the source as BUCKET/PREFIX, with the fields that the
// short form cannot say after it.
func (s DigestSource) String() string {
	out := s.Bucket + "/" + s.Prefix
	var extra []string
	if s.Name != "" {
		extra = append(extra, "name="+s.Name)
	}
	if s.Pattern != "" {
		extra = append(extra, "pattern="+s.Pattern)
	}
	if s.Keys != "" {
		extra = append(extra, "keys="+s.Keys)
	}
	if s.MaxBody != 0 {
		extra = append(extra, fmt.Sprintf("max_body=%d", s.MaxBody))
	}
	if s.Kind != "" {
		extra = append(extra, "kind="+s.Kind)
	}
	if s.ConfirmBlobs {
		extra = append(extra, "confirm_blobs=true")
	}
	if len(extra) > 0 {
		out += "{" + strings.Join(extra, " ") + "}"
	}
	return out
}

// Layout builds the content-addressed layout of digests.namespaces and
// digests.sources, each entry's missing fields filled from the defaults
// and from digests.verify and digests.max_body, and checks it: a bad
// pattern, or a namespace and a source that one key could belong to both
// of, is an error. An empty layout (nothing configured) means digest
// reclamation is off. Each call compiles a new layout.
func (c *Config) Layout() (*cas.Layout, error) {
	l, errs := c.buildLayout()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return l, nil
}

// Sessions configures the multipart upload sessions and their reconciler.
type Sessions struct {
	Enabled              bool
	EnforceOwnership     bool
	AdminPrincipals      []string
	IdempotencyRetention time.Duration
	Retention            time.Duration
	ReconcileInterval    time.Duration
	ReconcileAfter       time.Duration
	StuckLimit           time.Duration
	CompleteHold         time.Duration
}

// Backend is the S3 server behind the gateway.
type Backend struct {
	// Endpoint is the backend's base URL, such as http://127.0.0.1:9100.
	Endpoint string
	Region   string
	// CAFile names the PEM certificate authorities of an https backend.
	CAFile    string
	AccessKey string
	SecretKey Secret
	// SecretKeyFile names a file holding SecretKey; Load reads it into
	// SecretKey.
	SecretKeyFile string
	// Identities are the other backend keys that client credentials may
	// name (AccessKey and SecretKey are backend.DefaultIdentity).
	Identities []BackendIdentity
}

// Credential is one access key the gateway accepts from clients. The
// principal names who owns the uploads made with it; several keys may share
// one principal.
type Credential struct {
	AccessKey string
	SecretKey Secret
	Principal string
	// Backend names the backend identity the key's requests are signed
	// with; "" is backend.DefaultIdentity.
	Backend string
}

// Etcd says where sweepgate keeps its state.
type Etcd struct {
	// Endpoints of an external cluster; empty runs an embedded etcd.
	Endpoints   []string
	Prefix      string
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd request made for a client's request.
	RequestTimeout time.Duration
	// CAFile verifies the cluster's certificates (https:// endpoints);
	// CertFile and KeyFile are the client certificate a cluster that
	// checks client certificates asks for.
	CAFile, CertFile, KeyFile string
	// Username signs in to a cluster with authentication on, with the
	// password in PasswordFile.
	Username     string
	PasswordFile string
	Embedded     EmbeddedEtcd
	// Shards, when set, are the etcd clusters that keep the state, each of
	// its buckets (the first of every bucket no shard lists); Endpoints is
	// then empty. Use Config.Shards for the list with defaults filled.
	Shards []EtcdShard
}

// EmbeddedEtcd configures the in-process etcd used when Etcd.Endpoints is
// empty.
type EmbeddedEtcd struct {
	DataDir                 string
	ClientURL               string
	PeerURL                 string
	AutoCompactionMode      string
	AutoCompactionRetention string
	QuotaBackendBytes       int64
}

// Admin is the operators' listener: the status page, the admin API, metrics
// and health probes, kept off the S3 port so that it can stay on loopback or
// a private network.
type Admin struct {
	// Listen is its host:port; empty turns it off.
	Listen string
	// Hosts are more names the listener answers to, besides its own
	// address (see admin.hosts), in NormalizeHost's form.
	Hosts []string
	// Token is the bearer token every /admin/v1 request must carry. Use
	// Config.AdminToken, which also reads TokenFile.
	Token Secret
	// TokenFile names a file whose trimmed content is the token, so that
	// a container can mount it as a secret instead of exposing it in its
	// environment.
	TokenFile string
	// Pprof serves net/http/pprof under /debug/pprof/, behind the token.
	Pprof bool
	// TLSCertFile and TLSKeyFile, both set, make the listener serve HTTPS
	// only, with this certificate; both empty, plain HTTP.
	TLSCertFile string
	TLSKeyFile  string
}

// Shutdown configures how serve stops on SIGINT or SIGTERM.
type Shutdown struct {
	// DrainDelay is how long the listeners go on serving, new requests
	// included, after /readyz turns 503, so that load balancers stop
	// sending before the listeners close.
	DrainDelay time.Duration
	// Timeout bounds the wait for in-flight requests once the listeners
	// stop accepting; requests still running then are cut off.
	Timeout time.Duration
}

// Default shutdown timings: a drain a little longer than a load
// balancer's usual probe interval, and Kubernetes' default termination
// grace period for the whole stop.
const (
	DefaultDrainDelay      = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// Log configures the process log.
type Log struct {
	Format string // text or json
	Level  string // debug, info, warn or error
}

// UsesEmbeddedEtcd reports whether serve runs its own etcd.
func (c *Config) UsesEmbeddedEtcd() bool { return len(c.Etcd.Endpoints) == 0 && !c.Sharded() }

// StoreConfig returns the embedded etcd settings in etcdstore's terms.
func (e EmbeddedEtcd) StoreConfig() etcdstore.EmbeddedConfig {
	return etcdstore.EmbeddedConfig{
		DataDir:                 e.DataDir,
		ClientURL:               e.ClientURL,
		PeerURL:                 e.PeerURL,
		AutoCompactionMode:      e.AutoCompactionMode,
		AutoCompactionRetention: e.AutoCompactionRetention,
		QuotaBackendBytes:       e.QuotaBackendBytes,
	}
}

// ClientRegion returns the region clients sign for: Region, or the backend's
// region when Region is empty.
func (c *Config) ClientRegion() string {
	if c.Region != "" {
		return c.Region
	}
	return c.Backend.Region
}

// ClientCredentials returns every credential the gateway accepts: the
// configured ones, each with its principal defaulting to its access key, and
// the backend's own key when AcceptBackendCredentials is on. A configured
// entry for the backend's access key takes its place, which is how its
// principal is named.
func (c *Config) ClientCredentials() []Credential {
	out := make([]Credential, 0, len(c.Credentials)+1)
	seen := make(map[string]bool, len(c.Credentials))
	for _, cr := range c.Credentials {
		if cr.Principal == "" {
			cr.Principal = cr.AccessKey
		}
		seen[cr.AccessKey] = true
		out = append(out, cr)
	}
	if c.AcceptBackendCredentials && c.Backend.AccessKey != "" && !seen[c.Backend.AccessKey] {
		out = append(out, Credential{
			AccessKey: c.Backend.AccessKey,
			SecretKey: c.Backend.SecretKey,
			Principal: c.Backend.AccessKey,
		})
	}
	return out
}

// LogLevel returns Log.Level as a slog.Level (info when it is not valid).
func (c *Config) LogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Log.Level)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// String lists every setting as key=value, with secrets redacted, so a whole
// Config can be printed or logged without leaking keys.
func (c *Config) String() string {
	var b strings.Builder
	for i, s := range Settings() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", s.Key, s.format(c))
	}
	return b.String()
}

// GoString keeps %#v from printing the secrets that String hides.
func (c *Config) GoString() string { return "config.Config{" + c.String() + "}" }

// LogValue logs every setting as an attribute, secrets redacted.
func (c *Config) LogValue() slog.Value {
	settings := Settings()
	attrs := make([]slog.Attr, 0, len(settings))
	for _, s := range settings {
		attrs = append(attrs, slog.String(s.Key, s.format(c)))
	}
	return slog.GroupValue(attrs...)
}

// Secret is a string that never prints: fmt, slog and text encoders see
// "[redacted]" (or nothing, when it is empty). Convert it with string() where
// the real value is needed.
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts %#v too.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue redacts the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText redacts the secret in JSON, YAML and any other text encoding,
// so that dumping a Config for debugging cannot leak it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
