// Package e2e holds sweepgate's end-to-end tests: a real MinIO, the built
// sweepgate binary with embedded etcd in front of it, and real S3 clients
// (aws-sdk-go-v2, minio-go, and the aws, s3cmd and rclone command-line
// clients) talking to it. The harness that starts all that lives in
// e2e/harness.
//
// The test files carry the build tag e2e, so that `go test ./...` stays the
// quick loop. Run them with `make test` (which builds bin/minio first), or
// directly with `go test -tags e2e ./e2e/` once bin/minio exists.
// SWEEPGATE_E2E_TARGET=minio runs the same tests against MinIO alone, to
// tell a wrong test from a wrong gateway. SWEEPGATE_E2E_SHARDS=3 runs them
// with every gateway over three etcd shards and each test's buckets spread
// over them (`make test-e2e-shards`; docs/testing.md).
package e2e
