// Package chaos runs seeded fault campaigns against the whole of sweepgate
// at once: one MinIO, a three-member etcd cluster and two
// sweepgate processes, each behind a fault-injecting proxy on the client
// side, with the gateways' backend behind another one. Clients using
// aws-sdk-go-v2 and minio-go upload, pause, resume, abort and abandon
// multipart uploads and push blobs and manifests into a content-addressed
// layout; producers like a registry with a blob descriptor cache write
// tags (a source with confirm_blobs) naming blobs they pushed long ago
// without pushing them again, and upload a blob again when the tag is
// refused with BlobNotStored, or push a blob that is stored and then name
// it; and a writer around the gateways adds parts straight to MinIO
// to paused uploads, while the reclaimer runs with grace periods of
// seconds and faults arrive at random: lost and delayed responses, backend
// deletes delivered after their sender timed out, gateways killed and
// restarted, a gateway restarted with its clock offset, or with another
// digests layout (without the manifests' source, or with a namespace
// more), an etcd member killed, the whole etcd cluster frozen (SIGSTOP),
// etcd unreachable from one gateway only (a partition: that gateway
// reaches the members through TCP proxies that hold its connections
// while the other gateway and the members keep talking, long enough for
// its probe of etcd to fail and its refusals to be served), the reclaimer
// leader paused past its lease. Session-free producers put, read, head
// and list plain objects and read referenced blobs, one attempt each on
// either gateway. A checker then proves what sweepgate promises: no
// acknowledged object lost or changed, no live upload reclaimed, no
// upload aborted with a part newer than its mark, nothing abandoned left
// behind, no referenced blob deleted (also by a delete that outlived its
// guard), no acknowledged tag that does not pull, nothing deleted by a
// pass that decided while a clock was off or while the gateways' layouts
// differed, no destructive step outside a term that led, and no
// session-free request failed (a request that needs no etcd answered
// with a server error, or left unanswered during an etcd fault, by a
// gateway that was live and unpaused with no proxy fault or backend
// failure on the request).
//
// Everything random comes from one seed, so a failing campaign is run again
// with the same schedule of operations and faults (the exact interleaving
// with the processes' own timing is not reproducible, the schedule is):
//
//	go test -tags chaos -v -run TestChaos ./chaos/          # one campaign, random seed
//	CHAOS_SEED=42 CHAOS_DURATION=2m CHAOS_CLIENTS=8 go test -tags chaos -v -run TestChaos ./chaos/
//	make chaos                                              # campaigns for CHAOS_TIME (30m)
//
// Each campaign writes a log of every operation, outcome and fault, the seed
// on its first line, under SWEEPGATE_TEST_ARTIFACTS when that is set.
//
// The package holds tests only, behind the build tag chaos (so that `go test
// ./...` stays the quick loop); this file exists so the directory is a
// package that `go vet ./...` and `go list` see.
package chaos
