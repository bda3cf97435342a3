// Size: the table of every setting, kept in one place so that the
// configuration reference (docs/configuration.md) is generated from one list.

package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
)

// EnvPrefix starts the name of every environment variable sweepgate reads.
const EnvPrefix = "SWEEPGATE_"

// DefaultAdminListen is where the admin API listens unless admin.listen
// says otherwise; the admin commands call it there by default too.
const DefaultAdminListen = "127.0.0.1:9001"

// ConfigFlag and ConfigEnv name the YAML file to read. They are not
// settings themselves: a file cannot name another file.
const (
	ConfigFlag = "config"
	ConfigEnv  = EnvPrefix + "CONFIG"
)

// Setting is one configuration setting and the name it has in each source.
type Setting struct {
	// Key is the YAML path, dotted: "backend.endpoint" is
	// `backend: {endpoint: ...}`.
	Key string
	// Flag is the command-line flag without dashes: "backend-endpoint".
	Flag string
	// Env is the environment variable: "SWEEPGATE_BACKEND_ENDPOINT".
	Env string
	// Default is the default in the syntax of a flag value; empty means
	// none (or a value derived from another setting, see DefaultDoc).
	Default string
	// DefaultDoc describes a default that is not a literal value.
	DefaultDoc string
	// Arg names the value in help text: ADDR, URL, DURATION.
	Arg string
	// Usage says what the setting is for.
	Usage string
	// Secret settings are never printed.
	Secret bool
	// Required settings have no default and must be set.
	Required bool
	// Reloadable settings take effect at a reload (SIGHUP, POST
	// /admin/v1/reload); a change to any other waits for a restart.
	Reloadable bool
	// toggle is set on a reloadable setting whose change from empty to
	// set, or back, still waits for a restart (it turns a listener's TLS
	// on or off).
	toggle bool
	// field returns a pointer to the setting's field in a Config; its type
	// decides how values are parsed.
	field func(*Config) any
}

// IsList reports whether the setting holds a list: a repeated flag adds to
// it, and a flag or environment value is split at commas.
func (s Setting) IsList() bool {
	switch s.field(&Config{}).(type) {
	case *[]string, *[]Credential, *[]BackendIdentity, *[]DigestNamespace, *[]DigestSource, *[]EtcdShard:
		return true
	}
	return false
}

func (s Setting) isBool() bool {
	_, ok := s.field(&Config{}).(*bool)
	return ok
}

// setting builds a table row whose flag and environment names are derived
// from key, so that every name follows one rule.
func setting(key, arg, def, usage string, field func(*Config) any) Setting {
	return Setting{
		Key:     key,
		Flag:    strings.NewReplacer(".", "-", "_", "-").Replace(key),
		Env:     EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key)),
		Default: def,
		Arg:     arg,
		Usage:   usage,
		field:   field,
	}
}

func (s Setting) required() Setting           { s.Required = true; return s }
func (s Setting) secret() Setting             { s.Secret = true; return s }
func (s Setting) reloadable() Setting         { s.Reloadable = true; return s }
func (s Setting) toggleNeedsRestart() Setting { s.toggle = true; return s }
func (s Setting) defaultDoc(d string) Setting { s.DefaultDoc = d; return s }
func (s Setting) names(flag, env string) Setting {
	s.Flag, s.Env = flag, env
	return s
}

// duration writes a default duration as a flag takes it and the docs show
// it: its non-zero hours, minutes and seconds ("168h", "1m30s", "0s").
func duration(d time.Duration) string {
	h, m, sec := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// fraction writes a default fraction as a flag takes it.
func fraction(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Settings returns the table of every setting, in the order help and docs
// show them. It returns a new slice on each call.
func Settings() []Setting {
	return []Setting{
		setting("listen", "ADDR", ":9000",
			"Address (host:port) where S3 clients connect over plain HTTP. Empty turns plain HTTP off.",
			func(c *Config) any { return &c.Listen }),
		setting("tls_listen", "ADDR", "",
			"Address (host:port) where S3 clients connect over HTTPS. Empty turns HTTPS off; when set, tls_cert_file and tls_key_file are required.",
			func(c *Config) any { return &c.TLSListen }),
		setting("tls_cert_file", "FILE", "",
			"PEM file with the certificate chain served on tls_listen.",
			func(c *Config) any { return &c.TLSCertFile }).reloadable(),
		setting("tls_key_file", "FILE", "",
			"PEM file with the private key of tls_cert_file.",
			func(c *Config) any { return &c.TLSKeyFile }).reloadable(),
		setting("region", "REGION", "",
			"Region that clients sign their requests for (the region in their SigV4 credential scope).",
			func(c *Config) any { return &c.Region }).defaultDoc("the value of backend.region"),
		setting("domains", "LIST", "",
			"Domain names for virtual-hosted-style requests: a request to BUCKET.DOMAIN addresses BUCKET. Comma-separated in a flag or environment variable, a list in YAML. Empty accepts path-style requests only.",
			func(c *Config) any { return &c.Domains }),
		setting("backend.endpoint", "URL", "",
			"URL of the S3 server behind the gateway, such as http://127.0.0.1:9100.",
			func(c *Config) any { return &c.Backend.Endpoint }).required(),
		setting("backend.region", "REGION", backend.DefaultRegion,
			"Region the backend expects requests to be signed for.",
			func(c *Config) any { return &c.Backend.Region }),
		setting("backend.ca_file", "FILE", "",
			"PEM file of the certificate authorities that sign an https backend's certificate (a private CA). Empty uses the system's roots.",
			func(c *Config) any { return &c.Backend.CAFile }),
		setting("backend.access_key", "KEY", "",
			"Access key that the gateway signs its backend requests with.",
			func(c *Config) any { return &c.Backend.AccessKey }).required(),
		setting("backend.secret_key", "SECRET", "",
			"Secret key of backend.access_key. Prefer the environment or the file to a flag, which other users can see in the process list.",
			func(c *Config) any { return &c.Backend.SecretKey }).secret().reloadable().defaultDoc("required, or backend.secret_key_file"),
		setting("backend.secret_key_file", "FILE", "",
			"File whose content, surrounding whitespace trimmed, is backend.access_key's secret (a mounted secret). It is read at start and again at every reload (SIGHUP or POST /admin/v1/reload). Set backend.secret_key or backend.secret_key_file, not both.",
			func(c *Config) any { return &c.Backend.SecretKeyFile }).reloadable(),
		setting("backend.identities", "NAME:AK:SECRET", "",
			"More backend keys, each named, that client credentials may name (their backend) so that the backend's own policy for that key applies to the client's requests; backend.access_key and backend.secret_key are the identity named default. The flag takes one NAME:ACCESS_KEY:SECRET and may be repeated; the environment variable takes a comma-separated list of them; YAML takes a list of {name, access_key, secret_key} or {name, access_key, secret_key_file}, where secret_key_file names a file whose content, surrounding whitespace trimmed, is the secret (read at start and again at every reload).",
			func(c *Config) any { return &c.Backend.Identities }).names("backend-identity", EnvPrefix+"BACKEND_IDENTITIES").secret().reloadable(),
		setting("credentials", "AK:SECRET[:PRINCIPAL]", "",
			"Client credentials the gateway accepts. The flag takes one ACCESS_KEY:SECRET[:PRINCIPAL] and may be repeated; the environment variable takes a comma-separated list of them; YAML takes a list of {access_key, secret_key, principal, backend}. The principal, who owns the uploads made with the key, defaults to the access key. backend names the backend identity (backend.identities) the key's requests are signed with, default: default, the key of backend.access_key; it is set in YAML only, since a secret may contain ':' and another field after it could not be told apart. A secret that contains ':' needs the principal after it; one that contains ',' can only be given in YAML.",
			func(c *Config) any { return &c.Credentials }).names("credential", EnvPrefix+"CREDENTIALS").secret().reloadable(),
		setting("credentials_file", "FILE", "",
			"YAML file listing more client credentials, as a list of {access_key, secret_key, principal, backend} (a mounted secret). They are added to credentials. It is read at start and again at every reload (SIGHUP or POST /admin/v1/reload), so keys are added, removed or rotated without a restart.",
			func(c *Config) any { return &c.CredentialsFile }).reloadable(),
		setting("trusted_proxies", "LIST", "",
			"Addresses of the proxies and load balancers in front of the gateway, as CIDR prefixes or single addresses (comma-separated in a flag or environment variable, a list in YAML). A request whose connection comes from one of them is taken to be from the right-most X-Forwarded-For entry that is not itself a trusted proxy, and with proxy_protocol the connection is from the source its PROXY header names; a request from any other address is from that address, whatever headers it sends. Empty trusts no proxy.",
			func(c *Config) any { return &c.TrustedProxies }).reloadable(),
		setting("proxy_protocol", "BOOL", "false",
			"Read a PROXY protocol (version 1 or 2) header at the start of every S3 connection (HTTP and HTTPS) from a trusted proxy (trusted_proxies), and take the client's address from it. A connection from a trusted proxy without the header stands for the proxy itself, as it would with proxy_protocol off; a connection from any other address that starts with a PROXY header is refused.",
			func(c *Config) any { return &c.ProxyProtocol }),
		setting("limits.max_in_flight", "N", "0",
			"Most S3 requests served at once, over every credential; one more is refused with 503 SlowDown and Retry-After before anything is done. 0 is no limit. The admin listener is never limited.",
			func(c *Config) any { return &c.Limits.MaxInFlight }).reloadable(),
		setting("limits.max_in_flight_per_credential", "N", "0",
			"Most S3 requests served at once for one access key, counted once the request's signature is verified; one more is refused with 503 SlowDown and Retry-After before anything is done. 0 is no limit.",
			func(c *Config) any { return &c.Limits.MaxInFlightPerCredential }).reloadable(),
		setting("limits.body_read_timeout", "DURATION", duration(DefaultBodyReadTimeout),
			"Longest the gateway waits for the next bytes of a request body once it asks for them. A client that sends nothing for that long is cut off with 400 RequestTimeout and nothing of the request is written; a client that keeps sending, however slowly, is never cut off. 0 waits forever.",
			func(c *Config) any { return &c.Limits.BodyReadTimeout }).reloadable(),
		setting("accept_backend_credentials", "BOOL", "true",
			"Also accept the backend's own access key from clients (principal: the access key, unless credentials lists that key), so that clients only change their endpoint.",
			func(c *Config) any { return &c.AcceptBackendCredentials }),
		setting("max_clock_skew", "DURATION", duration(sigv4.DefaultMaxSkew),
			"How far a request's signing time may be from the gateway's clock before it is refused.",
			func(c *Config) any { return &c.MaxClockSkew }),
		setting("etcd.endpoints", "LIST", "",
			"Client URLs of an external etcd cluster (comma-separated in a flag or environment variable). Empty runs an embedded single-node etcd with the etcd.embedded settings.",
			func(c *Config) any { return &c.Etcd.Endpoints }),
		setting("etcd.prefix", "PREFIX", etcdstore.DefaultPrefix,
			"Prefix of every key sweepgate writes in etcd, so that several gateways or applications can share a cluster.",
			func(c *Config) any { return &c.Etcd.Prefix }),
		setting("etcd.shards", "LIST", "",
			"Several etcd clusters that keep the state, each bucket's in one (docs/architecture.md, \"Shards\"). A list of {name, endpoints, prefix, buckets, ca_file, cert_file, key_file, username, password_file}; a flag or environment variable takes the same in YAML's flow style, such as [{name: a, endpoints: [http://etcd-a:2379]}, {name: b, endpoints: [http://etcd-b:2379], buckets: [logs]}], and a repeated flag adds shards. prefix and the TLS and authentication fields default to etcd.prefix, etcd.ca_file, etcd.cert_file, etcd.key_file, etcd.username and etcd.password_file. The first shard is the default one: it holds every bucket no shard lists, and the directory of which shard each bucket's state was first written on, which a later configuration may not contradict (move a bucket with 'sweepgate shards move'). A bucket listed twice, and a digest layout whose buckets are on different shards, are refused. Empty: one store, etcd.endpoints or the embedded etcd. With shards etcd.endpoints must be empty.",
			func(c *Config) any { return &c.Etcd.Shards }),
		setting("etcd.dial_timeout", "DURATION", duration(etcdstore.DefaultDialTimeout),
			"How long to wait for etcd to answer when connecting.",
			func(c *Config) any { return &c.Etcd.DialTimeout }),
		setting("etcd.request_timeout", "DURATION", duration(etcdstore.DefaultRequestTimeout),
			"Longest a client's request waits for one etcd request (multipart calls, reference writes, blob writes and deletes) before it is refused with SlowDown and Retry-After; also the bound of the probe behind /etcdz, repeated every second, while which fails such requests are refused at once. Blob reads and requests outside digest layouts never wait for etcd.",
			func(c *Config) any { return &c.Etcd.RequestTimeout }),
		setting("etcd.ca_file", "FILE", "",
			"PEM file of the certificate authorities that sign an external etcd cluster's certificates (https:// endpoints). Empty uses the system's roots.",
			func(c *Config) any { return &c.Etcd.CAFile }),
		setting("etcd.cert_file", "FILE", "",
			"PEM file of the client certificate presented to an etcd cluster that checks client certificates (--client-cert-auth); with etcd.key_file.",
			func(c *Config) any { return &c.Etcd.CertFile }),
		setting("etcd.key_file", "FILE", "",
			"PEM file of the private key of etcd.cert_file.",
			func(c *Config) any { return &c.Etcd.KeyFile }),
		setting("etcd.username", "USER", "",
			"etcd user sweepgate signs in as when the cluster has authentication on; with etcd.password_file. Its role needs read and write on the keys under etcd.prefix (docs/deployment.md shows how to grant it).",
			func(c *Config) any { return &c.Etcd.Username }),
		setting("etcd.password_file", "FILE", "",
			"File whose content, surrounding whitespace trimmed, is etcd.username's password (a mounted secret). It is read at start.",
			func(c *Config) any { return &c.Etcd.PasswordFile }),
		setting("etcd.embedded.data_dir", "DIR", ".data/etcd",
			"Directory of the embedded etcd's data. It must survive restarts: it holds the upload sessions.",
			func(c *Config) any { return &c.Etcd.Embedded.DataDir }),
		setting("etcd.embedded.client_url", "URL", etcdstore.DefaultClientURL,
			"Where the embedded etcd serves clients. The host must be an IP address or localhost; port 0 picks a free port.",
			func(c *Config) any { return &c.Etcd.Embedded.ClientURL }),
		setting("etcd.embedded.peer_url", "URL", etcdstore.DefaultPeerURL,
			"Where the embedded etcd listens for raft peers (unused by a single node, but bound). Port 0 picks a free port.",
			func(c *Config) any { return &c.Etcd.Embedded.PeerURL }),
		setting("etcd.embedded.auto_compaction_mode", "MODE", etcdstore.DefaultAutoCompactionMode,
			"How the embedded etcd compacts its history: periodic (retention is a duration) or revision (retention is a number of revisions).",
			func(c *Config) any { return &c.Etcd.Embedded.AutoCompactionMode }),
		setting("etcd.embedded.auto_compaction_retention", "VALUE", etcdstore.DefaultAutoCompactionRetention,
			"How much history the embedded etcd keeps: a duration such as 1h for periodic mode, a count for revision mode; 0 turns compaction off.",
			func(c *Config) any { return &c.Etcd.Embedded.AutoCompactionRetention }),
		setting("etcd.embedded.quota_backend_bytes", "BYTES", strconv.FormatInt(etcdstore.DefaultQuotaBackendBytes, 10),
			"Size limit of the embedded etcd's database. Past it etcd refuses writes until compacted and defragmented, and /readyz fails.",
			func(c *Config) any { return &c.Etcd.Embedded.QuotaBackendBytes }),
		setting("sessions.enabled", "BOOL", "true",
			"Keep a session in etcd for every multipart upload and serve the multipart calls around it. Off, multipart calls pass through unrecorded.",
			func(c *Config) any { return &c.Sessions.Enabled }),
		setting("sessions.enforce_ownership", "BOOL", "true",
			"Only the principal that created an upload (or an admin principal) may upload parts to it, list, complete or abort it. Turn off where clients share one key.",
			func(c *Config) any { return &c.Sessions.EnforceOwnership }),
		setting("sessions.admin_principals", "LIST", "",
			"Principals that may act on every upload session.",
			func(c *Config) any { return &c.Sessions.AdminPrincipals }),
		setting("sessions.idempotency_retention", "DURATION", duration(multipart.DefaultIdempotencyRetention),
			"How long the outcome of a request with an Idempotency-Key header is kept for replay.",
			func(c *Config) any { return &c.Sessions.IdempotencyRetention }),
		setting("sessions.retention", "DURATION", "168h",
			"How long completed and aborted sessions (and their part records) are kept before they are pruned. A retried complete within it gets the recorded answer.",
			func(c *Config) any { return &c.Sessions.Retention }),
		setting("sessions.reconcile_interval", "DURATION", "1m",
			"How often the reconciler settles aborting, cleanup_pending and completing sessions by looking at the backend again. 0 runs it only at start-up.",
			func(c *Config) any { return &c.Sessions.ReconcileInterval }),
		setting("sessions.reconcile_after", "DURATION", duration(multipart.DefaultReconcileAfter),
			"How long a session must have stood in aborting, cleanup_pending or completing before the reconciler acts on it, so it does not race the request that moved it there.",
			func(c *Config) any { return &c.Sessions.ReconcileAfter }),
		setting("sessions.complete_hold", "DURATION", duration(multipart.DefaultCompleteHold),
			"How long a complete in flight on the backend keeps other completes of the same upload out (they get OperationAborted) after its gateway stops renewing the hold, for example because it died.",
			func(c *Config) any { return &c.Sessions.CompleteHold }),
		setting("sessions.stuck_limit", "DURATION", "1h",
			"A session completing for longer than this is flagged for a person (logged, counted in metrics); it is never reverted or deleted.",
			func(c *Config) any { return &c.Sessions.StuckLimit }),
		setting("reclaim.enabled", "BOOL", "true",
			"Run the reclaimer in this process: it campaigns in the reclaimer election (only the leader acts) and, while it leads, runs a pass every reclaim.interval and on demand. Turn it off on replicas that should never reclaim; they still answer the reclaim admin API's reads and plans. Needs sessions.enabled.",
			func(c *Config) any { return &c.Reclaim.Enabled }),
		setting("reclaim.dry_run", "BOOL", "false",
			"Make every pass a plan: it decides and reports what it would mark and delete, and changes nothing anywhere.",
			func(c *Config) any { return &c.Reclaim.DryRun }),
		setting("reclaim.grace", "DURATION", duration(reclaim.DefaultGrace),
			"An active upload with no activity (part upload, part copy, part list, complete or abort attempt) for longer than this is marked expired. Marking deletes nothing.",
			func(c *Config) any { return &c.Reclaim.Grace }),
		setting("reclaim.delete_after", "DURATION", duration(reclaim.DefaultDeleteAfter),
			"An upload marked expired and left unchanged for longer than this is deleted by a later pass. Any activity first makes it active again.",
			func(c *Config) any { return &c.Reclaim.DeleteAfter }),
		setting("reclaim.stuck_limit", "DURATION", duration(reclaim.DefaultStuckLimit),
			"A pass flags a session completing for longer than this as stuck, for a person; it is never deleted or reverted. (The reconciler that serve runs between passes uses sessions.stuck_limit.)",
			func(c *Config) any { return &c.Reclaim.StuckLimit }),
		setting("reclaim.clock_skew", "DURATION", duration(reclaim.DefaultClockSkew),
			"A live gateway's published clock or the backend's Date further from the reclaimer's clock than this stops the pass with nothing marked or deleted: a clock that jumped must not make live uploads or trashed references look old. A recorded time (session, trash, tombstone) further in the future keeps its record (an upload is kept, trash expires later) and is reported.",
			func(c *Config) any { return &c.Reclaim.ClockSkew }),
		setting("reclaim.max_delete", "PARTS", strconv.FormatInt(reclaim.DefaultMaxDelete, 10),
			"Circuit breaker: a pass whose plan deletes more parts than this is refused (nothing marked or deleted, reported, logged as an error, counted in metrics). -1 sets no absolute limit; reclaim.max_delete_fraction still applies.",
			func(c *Config) any { return &c.Reclaim.MaxDelete }),
		setting("reclaim.max_delete_fraction", "FRACTION", fraction(reclaim.DefaultMaxDeleteFraction),
			"Circuit breaker: a pass whose plan deletes more than this share of all parts stored in multipart uploads is refused. A number greater than 0, at most 1.",
			func(c *Config) any { return &c.Reclaim.MaxDeleteFraction }),
		setting("reclaim.max_delete_uploads", "UPLOADS", strconv.FormatInt(reclaim.DefaultMaxDeleteUploads, 10),
			"Circuit breaker: a pass whose plan deletes more uploads than this is refused, whatever their parts (an upload with no parts counts too). -1 sets no absolute limit; reclaim.max_delete_uploads_fraction still applies.",
			func(c *Config) any { return &c.Reclaim.MaxDeleteUploads }),
		setting("reclaim.max_delete_uploads_fraction", "FRACTION", fraction(reclaim.DefaultMaxDeleteUploadsFraction),
			"Circuit breaker: a pass whose plan deletes more than this share of all multipart uploads stored is refused. A number greater than 0, at most 1.",
			func(c *Config) any { return &c.Reclaim.MaxDeleteUploadsFraction }),
		setting("reclaim.max_mark", "UPLOADS", strconv.FormatInt(reclaim.DefaultMaxMark, 10),
			"Circuit breaker: a pass whose plan marks more uploads expired than this is refused. -1 sets no absolute limit; reclaim.max_mark_fraction still applies. A refused plan pauses the upload sweep until 'sweepgate reclaim resume --uploads'.",
			func(c *Config) any { return &c.Reclaim.MaxMark }),
		setting("reclaim.max_mark_fraction", "FRACTION", fraction(reclaim.DefaultMaxMarkFraction),
			"Circuit breaker: a pass whose plan marks more than this share of all multipart uploads stored is refused. A number greater than 0, at most 1.",
			func(c *Config) any { return &c.Reclaim.MaxMarkFraction }),
		setting("reclaim.interval", "DURATION", duration(reclaim.DefaultInterval),
			"Time between passes while this process leads. 'sweepgate reclaim run' starts one at once.",
			func(c *Config) any { return &c.Reclaim.Interval }),
		setting("reclaim.batch_size", "N", strconv.Itoa(reclaim.DefaultBatchSize),
			"Uploads a pass lists and examines per batch, 1 to 1000 (S3 lists at most 1000 at a time). A pass records its position after each batch, so a restart resumes there.",
			func(c *Config) any { return &c.Reclaim.BatchSize }),
		setting("reclaim.parallel", "N", strconv.Itoa(reclaim.DefaultParallel),
			"Uploads a pass examines at once (their parts listed on the backend, their sessions read), 1 to 256.",
			func(c *Config) any { return &c.Reclaim.Parallel }),
		setting("reclaim.backend_timeout", "DURATION", duration(reclaim.DefaultBackendTimeout),
			"Bound on each backend request of the reclaimer. An abort whose answer does not arrive in time is settled by listing again, never by a blind retry.",
			func(c *Config) any { return &c.Reclaim.BackendTimeout }),
		setting("reclaim.election_ttl", "DURATION", duration(reclaim.DefaultElectionTTL),
			"Lease of the reclaimer election, in whole seconds (at least 1s): how long a leader that crashed or lost etcd keeps the lead before another process takes over. A leader that stops cleanly hands over at once.",
			func(c *Config) any { return &c.Reclaim.ElectionTTL }),
		setting("reclaim.missing_check_budget", "N", strconv.Itoa(reclaim.DefaultMissingCheckBudget),
			"Most backend checks one pass spends on sessions whose upload the backend's listing did not show; the rest wait for the next pass.",
			func(c *Config) any { return &c.Reclaim.MissingCheckBudget }),
		setting("reclaim.pass_uploads", "UPLOADS", strconv.FormatInt(reclaim.DefaultPassUploads, 10),
			"Most backend uploads one pass lists, so that a pass over millions of uploads is short: each pass starts where the last one that ran to its end stopped (bucket and key order), decides only about what it listed, and the pass that reaches the last bucket completes a cycle; the report's slice says where a pass started and stopped and when the whole keyspace was last covered. The breaker judges each pass's own slice. 0 lists every upload in every pass.",
			func(c *Config) any { return &c.Reclaim.PassUploads }),
		setting("reclaim.backend_identity", "NAME", backend.DefaultIdentity,
			"Backend identity (backend.identities, or default for backend.access_key) that signs the requests of the reclaimer, the session reconciler, the digest sweep and the readiness check; no client request is signed with it unless a credential names it. Its minimum policy is in docs/architecture.md, \"Backend identities\".",
			func(c *Config) any { return &c.Reclaim.BackendIdentity }).reloadable(),
		setting("reclaim.buckets", "BUCKET", "",
			"Buckets the upload sweep lists; empty lists every bucket the backend's ListBuckets returns. When set, the reclaimer never calls ListBuckets, and the readiness check lists one key of each of these buckets instead, so the reclaimer's key may be allowed these buckets only (a bucket its policy denies does not fail the check: the key works, and the pass reports the bucket). A bucket the backend refuses (AccessDenied) is skipped by a pass and named in its report. The flag may be repeated; the environment variable takes a comma-separated list.",
			func(c *Config) any { return &c.Reclaim.Buckets }),
		setting("reclaim.witness_bucket", "BUCKET", "",
			"Bucket of the backend's copy of the restore witness: a small object the reclaim leader rewrites every few seconds after advancing the same record in etcd, so that a restore of etcd from a snapshot shows as the backend's copy being ahead, and no pass deletes anything until the gateways and a rebuild have caught up (docs/runbook.md, \"Restoring etcd from a snapshot\"). Empty: the bucket of the first content-addressed namespace, else the first of reclaim.buckets, else none: the witness is off, a restore of etcd goes unseen, and serve logs a warning (sweepgate never picks a bucket of its own accord: the object would show in a client's listing and keep the client from removing the bucket). The reclaimer's key needs s3:GetObject and s3:PutObject on the witness key. The object is rewritten every 2 seconds: in a versioned bucket give the witness key a lifecycle rule that expires noncurrent versions, or choose an unversioned bucket.",
			func(c *Config) any { return &c.Reclaim.WitnessBucket }),
		setting("reclaim.witness_key", "KEY", "",
			"Key of the backend's copy of the restore witness in reclaim.witness_bucket. Empty: "+reclaim.DefaultWitnessKeyPrefix+"/ followed by etcd.prefix without its slashes, so that deployments with different prefixes sharing a bucket keep apart. It must not lie in a content-addressed namespace or reference source, and no client should write it.",
			func(c *Config) any { return &c.Reclaim.WitnessKey }),
		setting("digests.namespaces", "BUCKET/PREFIX", "",
			"Content-addressed namespaces: bucket prefixes whose object keys carry the digest of their content (blobs), which the reclaimer deletes once no reference source names them. The flag takes one BUCKET/PREFIX and may be repeated; the environment variable takes a comma-separated list of them. Both use the default pattern (the key after the prefix is the 64 hex digits of a sha256 digest) and digests.verify. YAML takes a list of such strings or of {name, bucket, prefix, pattern, verify, content, confirm_blobs}: pattern is a regular expression that matches the whole key after the prefix and captures the digest's hex in a group named hex (and its algorithm in one named algo); content: manifests says a blob may be an OCI or Docker manifest or index, which keeps the blobs it names while it is stored itself (needs verify); confirm_blobs: true refuses such a manifest when a blob it names is not stored. Empty, with digests.sources empty, turns digest reclamation off.",
			func(c *Config) any { return &c.Digests.Namespaces }).names("digests-namespace", EnvPrefix+"DIGESTS_NAMESPACES"),
		setting("digests.sources", "BUCKET/PREFIX", "",
			"Reference sources: bucket prefixes whose objects (manifests, link or pointer files) name digests; a blob is kept while an object in a source, or one in the trash, names it. The gateway records the digests of every write into a source before the body reaches the backend. The flag takes one BUCKET/PREFIX and may be repeated; the environment variable takes a comma-separated list. Both find digests written sha256:HEX, as registry manifests and Git LFS pointer files write them. YAML takes a list of such strings or of {name, bucket, prefix, pattern, keys, max_body, kind, confirm_blobs}: keys narrows the source to the keys (after the prefix) it matches (sources that all set keys may share a prefix, and the first that matches a key owns it); kind is root (the default: its objects keep what they name) or cache (its objects keep nothing and are plain objects); confirm_blobs: true refuses a write naming a blob that is not stored (409 BlobNotStored), once its references are recorded; pattern is a regular expression whose every match in a body names a digest (group hex, and optionally algo). No source may overlap a namespace.",
			func(c *Config) any { return &c.Digests.Sources }).names("digests-source", EnvPrefix+"DIGESTS_SOURCES"),
		setting("digests.preset", "NAME", "",
			"A named layout added to digests.namespaces and digests.sources. 'distribution' is CNCF distribution's registry storage (its S3 driver) at digests.preset_storage: its blobs are a verified namespace whose manifests and indexes keep what they name (content), its manifest revision and tag links keep what they name (roots), and its layer links and tag histories keep nothing (a cache), so that a blob goes when the registry's own garbage collector would remove it.",
			func(c *Config) any { return &c.Digests.Preset }),
		setting("digests.preset_storage", "BUCKET[/ROOT]", "",
			"The storage digests.preset describes: the registry's bucket, and the storage driver's root directory after a slash when it sets one.",
			func(c *Config) any { return &c.Digests.PresetStorage }),
		setting("digests.verify", "BOOL", "true",
			"Refuse (BadDigest, nothing stored) a blob written into a namespace whose content does not hash to the digest its key names. Applies to the namespaces that do not set verify themselves.",
			func(c *Config) any { return &c.Digests.Verify }),
		setting("digests.max_body", "BYTES", strconv.FormatInt(cas.DefaultMaxBody, 10),
			"Largest reference object whose body is parsed for digests. A larger write into a reference source is refused, never recorded in part. Applies to the sources that do not set max_body themselves.",
			func(c *Config) any { return &c.Digests.MaxBody }),
		setting("digests.trash_window", "DURATION", duration(digests.DefaultTrashWindow),
			"How long the digests of a deleted reference object stay retained in the trash, where 'sweepgate trash restore' brings them back. A blob that only a deleted object names becomes collectable after it.",
			func(c *Config) any { return &c.Digests.TrashWindow }),
		setting("digests.placement_grace", "DURATION", duration(digestsweep.DefaultPlacementGrace),
			"Blobs younger than this are never reclaimed, so that a producer has time to write the manifest that names a blob it has just uploaded.",
			func(c *Config) any { return &c.Digests.PlacementGrace }),
		setting("digests.planes", "LIST", "",
			"Replica and backup planes that must have applied a reclamation before its bytes are deleted: each reports the etcd revision it has applied ('sweepgate frontier report'), and a blob goes only once every plane listed here has reached the revision its tombstone requires. A plane that has not reported counts as revision 0 and holds every delete. Empty: no plane is waited for.",
			func(c *Config) any { return &c.Digests.Planes }),
		setting("digests.max_delete", "N", strconv.FormatInt(digestsweep.DefaultMaxDelete, 10),
			"Circuit breaker: a digest pass whose plan deletes more blobs than this is refused (nothing deleted, reported, logged as an error, counted in metrics). -1 sets no absolute limit; digests.max_delete_fraction still applies.",
			func(c *Config) any { return &c.Digests.MaxDelete }),
		setting("digests.max_delete_fraction", "FRACTION", fraction(digestsweep.DefaultMaxDeleteFraction),
			"Circuit breaker: a digest pass whose plan deletes more than this share of all blobs stored in the namespaces is refused. A number greater than 0, at most 1.",
			func(c *Config) any { return &c.Digests.MaxDeleteFraction }),
		setting("digests.max_mark", "N", strconv.FormatInt(digestsweep.DefaultMaxMark, 10),
			"Circuit breaker: a digest pass that makes more blobs' tombstones pending than this is refused and pauses the digest sweep (its pending tombstones stay, and nothing is deleted until 'sweepgate reclaim resume --digests'). -1 sets no absolute limit; digests.max_mark_fraction still applies.",
			func(c *Config) any { return &c.Digests.MaxMark }),
		setting("digests.max_mark_fraction", "FRACTION", fraction(digestsweep.DefaultMaxMarkFraction),
			"Circuit breaker: a digest pass that makes more than this share of all blobs stored in the namespaces pending is refused. A number greater than 0, at most 1.",
			func(c *Config) any { return &c.Digests.MaxMarkFraction }),
		setting("digests.rebuild_interval", "DURATION", "0s",
			"How often the rebuild scans every reference source on the backend and compares it with the recorded references; references written around the gateway are retained, logged and counted. A digest pass whose rebuild failed deletes nothing. 0 rebuilds before every digest pass.",
			func(c *Config) any { return &c.Digests.RebuildInterval }),
		setting("digests.guard_settle", "DURATION", duration(digestsweep.DefaultGuardSettle),
			"How long a blob's guard stays armed after the deadline of a delete whose outcome was not clear (the request timed out, or the reclaimer that sent it lost the lead): the backend may still execute such a delete, so until then the blob reads 404 and writes naming it get the retryable 503; afterwards a fresh HEAD decides. Must be longer than reclaim.backend_timeout + reclaim.election_ttl; the reclaimer adds reclaim.clock_skew, since a successor measures it with its own clock.",
			func(c *Config) any { return &c.Digests.GuardSettle }),
		setting("digests.delete_parallel", "N", strconv.FormatInt(digestsweep.DefaultDeleteParallel, 10),
			"How many DeleteObjects requests (of up to 1000 blobs each) the collector has in flight at once. Each request's delete attempt is recorded on its guards before it is sent, and its blobs are settled from its own answer.",
			func(c *Config) any { return &c.Digests.DeleteParallel }),
		setting("digests.pass_blobs", "N", strconv.FormatInt(digestsweep.DefaultPassBlobs, 10),
			"Most objects one digest pass lists in the namespaces (in whole pages of reclaim.batch_size, so at least that many): each pass starts where the last one that ran to its end stopped and judges only what it listed; a tombstone goes ready, and is collected, only in a pass whose slice holds its blob, so a deletion takes two cycles instead of two passes. The report's slice says where a pass started and stopped and when every namespace was last covered. 0 lists every namespace in every pass.",
			func(c *Config) any { return &c.Digests.PassBlobs }),
		setting("digests.tombstone_retention", "DURATION", duration(digestsweep.DefaultTombstoneRetention),
			"How long tombstones in a final state (deleted, skipped) are kept, for reports and questions, before they are pruned.",
			func(c *Config) any { return &c.Digests.TombstoneRetention }),
		setting("admin.listen", "ADDR", DefaultAdminListen,
			"Address (host:port) of the admin listener: the status page, /metrics, /healthz, /readyz and the admin API (/admin/v1, see docs/admin-api.md). It answers only requests addressed (Host header) to its own name or address: the host of this setting, any loopback address and localhost on a loopback listener, any IP address and the machine's host name on 0.0.0.0 or [::], and the names in admin.hosts; any other is refused with 403, so that a web page whose name was rebound to this address gets nothing. Empty turns it off.",
			func(c *Config) any { return &c.Admin.Listen }),
		setting("admin.hosts", "LIST", "",
			"More names (or addresses) by which clients, scrapers and probes reach the admin listener, such as a DNS name or a proxy's: requests addressed (Host header) to them are accepted too. Names only, without port.",
			func(c *Config) any { return &c.Admin.Hosts }),
		setting("admin.token", "TOKEN", "",
			"Bearer token that every /admin/v1 request and the status page must carry (Authorization: Bearer TOKEN; the sweepgate commands send $SWEEPGATE_ADMIN_TOKEN), at least 16 characters of visible ASCII; /metrics, /healthz and /readyz stay open for scrapers and probes. Prefer the environment or admin.token_file to a flag, which other users can see in the process list. Empty, with admin.token_file empty: serve generates a token at its first start and keeps it in the file admin-token in etcd.embedded.data_dir (mode 0600), where the sweepgate commands find it through the same configuration.",
			func(c *Config) any { return &c.Admin.Token }).secret(),
		setting("admin.token_file", "FILE", "",
			"File whose content, surrounding whitespace trimmed, is the admin token (a mounted container secret, say). It is read at start. Set admin.token or admin.token_file, not both.",
			func(c *Config) any { return &c.Admin.TokenFile }),
		setting("admin.tls_cert_file", "FILE", "",
			"PEM file with the certificate chain of the admin listener. Set with admin.tls_key_file, the admin listener serves HTTPS only (TLS 1.2 or later), and the sweepgate commands reach it with https:// (verifying it against --admin-ca, else the system's roots). Empty, with admin.tls_key_file empty, it serves plain HTTP. A reload reads both files again and keeps the certificate in effect when they fail; turning TLS on or off needs a restart.",
			func(c *Config) any { return &c.Admin.TLSCertFile }).reloadable().toggleNeedsRestart(),
		setting("admin.tls_key_file", "FILE", "",
			"PEM file with the private key of admin.tls_cert_file.",
			func(c *Config) any { return &c.Admin.TLSKeyFile }).reloadable().toggleNeedsRestart(),
		setting("admin.pprof", "BOOL", "false",
			"Serve Go's profiles (net/http/pprof: CPU, heap, allocations, goroutines) under /debug/pprof/ on the admin listener, behind the admin token, for profiling the process under load. A CPU profile costs CPU while it runs.",
			func(c *Config) any { return &c.Admin.Pprof }),
		setting("shutdown.drain_delay", "DURATION", duration(DefaultDrainDelay),
			"After SIGINT or SIGTERM, how long the listeners go on serving (new requests included, without keep-alive) while /readyz answers 503, so that load balancers stop sending first. 0 stops accepting at once. A second signal ends the process at once.",
			func(c *Config) any { return &c.Shutdown.DrainDelay }),
		setting("shutdown.timeout", "DURATION", duration(DefaultShutdownTimeout),
			"After the drain delay, how long in-flight requests may run before they are cut off (and serve exits with status 1).",
			func(c *Config) any { return &c.Shutdown.Timeout }),
		setting("log.format", "FORMAT", "text",
			"Log format: text or json.",
			func(c *Config) any { return &c.Log.Format }),
		setting("log.level", "LEVEL", "info",
			"Least severe level logged: debug, info, warn or error. Audit lines (message \"audit\": every deletion, abort, mark, adoption, restore and resume) are written at every level.",
			func(c *Config) any { return &c.Log.Level }),
		setting("tracing.endpoint", "HOST:PORT", "",
			"OTLP/gRPC address (host:port) of the OpenTelemetry collector that serve exports its traces to: a span per S3 request, named by its operation, with its backend and etcd calls as children (docs/operations.md#traces). Empty turns tracing off: nothing is exported and a client's traceparent header is not passed on to the backend.",
			func(c *Config) any { return &c.Tracing.Endpoint }),
		setting("tracing.insecure", "BOOL", "false",
			"Send spans to tracing.endpoint over plain gRPC, without TLS: for a collector on the loopback or the same pod.",
			func(c *Config) any { return &c.Tracing.Insecure }),
		setting("tracing.ca_file", "FILE", "",
			"PEM file of the certificate authorities that sign the collector's certificate (a private CA). Empty uses the system's roots.",
			func(c *Config) any { return &c.Tracing.CAFile }),
		setting("tracing.sample_ratio", "FRACTION", fraction(DefaultTracingSampleRatio),
			"Fraction of the traces started at the gateway that are recorded and exported, from 0 to 1. A request with a traceparent header follows its caller's decision (parent-based sampling), whatever the ratio.",
			func(c *Config) any { return &c.Tracing.SampleRatio }),
	}
}

// setText sets the setting in c from flag or environment values. A scalar
// takes the last value; a list is replaced by the items of all values, each
// split at commas.
func (s Setting) setText(c *Config, values []string) error {
	if len(values) == 0 {
		return nil
	}
	last := values[len(values)-1]
	switch p := s.field(c).(type) {
	case *string:
		*p = last
	case *Secret:
		*p = Secret(last)
	case *bool:
		v, err := strconv.ParseBool(last)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (use true or false)", last)
		}
		*p = v
	case *time.Duration:
		v, err := parseDuration(last)
		if err != nil {
			return err
		}
		*p = v
	case *int64:
		v, err := strconv.ParseInt(strings.TrimSpace(last), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", last)
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(strings.TrimSpace(last), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%q is not a number (write it like 0.25)", last)
		}
		*p = v
	case *[]string:
		var items []string
		for _, v := range values {
			items = append(items, splitList(v)...)
		}
		*p = items
	case *[]Credential:
		var creds []Credential
		for _, v := range values {
			for _, item := range splitList(v) {
				cr, err := parseCredential(item)
				if err != nil {
					return err
				}
				creds = append(creds, cr)
			}
		}
		*p = creds
	case *[]BackendIdentity:
		var ids []BackendIdentity
		for _, v := range values {
			for _, item := range splitList(v) {
				id, err := parseIdentity(item)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
		}
		*p = ids
	case *[]DigestNamespace:
		var out []DigestNamespace
		for _, v := range values {
			for _, item := range splitList(v) {
				bucket, prefix, err := parseCASSpec(item)
				if err != nil {
					return err
				}
				out = append(out, DigestNamespace{Bucket: bucket, Prefix: prefix})
			}
		}
		*p = out
	case *[]DigestSource:
		var out []DigestSource
		for _, v := range values {
			for _, item := range splitList(v) {
				bucket, prefix, err := parseCASSpec(item)
				if err != nil {
					return err
				}
				out = append(out, DigestSource{Bucket: bucket, Prefix: prefix})
			}
		}
		*p = out
	case *[]EtcdShard:
		shards, err := shardsText(values)
		if err != nil {
			return err
		}
		*p = shards
	default:
		return fmt.Errorf("internal error: setting %s has unsupported type %T", s.Key, p)
	}
	return nil
}

// format returns the setting's value in c as text, redacted if secret.
func (s Setting) format(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return strconv.Quote(*p)
	case *Secret:
		return strconv.Quote(p.String())
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *[]string:
		return "[" + strings.Join(*p, ",") + "]"
	case *[]Credential:
		items := make([]string, len(*p))
		for i, cr := range *p {
			items[i] = cr.AccessKey + ":" + cr.SecretKey.String() + ":" + cr.Principal
			if cr.Backend != "" {
				items[i] += "@" + cr.Backend
			}
		}
		return "[" + strings.Join(items, ",") + "]"
	case *[]BackendIdentity:
		items := make([]string, len(*p))
		for i, id := range *p {
			items[i] = id.Name + ":" + id.AccessKey + ":" + redacted
		}
		return "[" + strings.Join(items, ",") + "]"
	case *[]DigestNamespace:
		return "[" + joinStrings(*p) + "]"
	case *[]DigestSource:
		return "[" + joinStrings(*p) + "]"
	case *[]EtcdShard:
		return "[" + joinStrings(*p) + "]"
	default:
		return fmt.Sprintf("%T", p)
	}
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use a number with a unit, such as 30s, 15m or 1h)", v)
	}
	return d, nil
}

// splitList splits a comma-separated value, trimming spaces and dropping
// empty items so that "a, b," means [a b].
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func joinStrings[T fmt.Stringer](items []T) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return strings.Join(out, ",")
}

// parseCASSpec parses the short form of a namespace or source,
// BUCKET/PREFIX, in the words of a setting rather than of package cas.
func parseCASSpec(v string) (bucket, prefix string, err error) {
	bucket, prefix, err = cas.ParseSpec(v)
	if err != nil {
		return "", "", fmt.Errorf("%q: want BUCKET/PREFIX, such as registry/blobs/sha256/ (the prefix may be empty)", v)
	}
	return bucket, prefix, nil
}

// parseCredential parses ACCESS_KEY:SECRET[:PRINCIPAL]. The access key ends
// at the first ':'; with two or more colons the principal starts after the
// last one, so a secret may itself contain ':' when a principal follows.
func parseCredential(v string) (Credential, error) {
	ak, rest, ok := strings.Cut(v, ":")
	if !ok {
		return Credential{}, fmt.Errorf("credential %q: want ACCESS_KEY:SECRET[:PRINCIPAL]", redactCredential(v))
	}
	cr := Credential{AccessKey: ak, SecretKey: Secret(rest)}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		cr.SecretKey, cr.Principal = Secret(rest[:i]), rest[i+1:]
	}
	if cr.AccessKey == "" || cr.SecretKey == "" {
		return Credential{}, fmt.Errorf("credential %q: access key and secret must not be empty", redactCredential(v))
	}
	return cr, nil
}

// redactCredential hides everything after the access key, so that an error
// about a malformed credential never prints its secret.
func redactCredential(v string) string {
	ak, _, ok := strings.Cut(v, ":")
	if !ok {
		return redacted
	}
	return ak + ":" + redacted
}
