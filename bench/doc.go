// Package bench holds sweepgate's benchmarks: the same S3 workloads run
// directly against MinIO and through sweepgate in one run, reported as
// gateway/direct ratios against the targets docs/benchmarks.md gives (the
// 64 MiB GET and the small requests also through a bare
// httputil.ReverseProxy in the same rounds, with the gateway's ratio and
// CPU per request over the bare proxy's), plus
// the gateway's resident memory growth while a 1 GiB object streams through
// and the etcd commits the gateway makes per UploadPart of a burst (etcd
// revisions writing the upload's keys, with its
// sweepgate_etcd_request_duration_seconds counts by kind beside them), and
// sweepgate's passes against distribution's `registry garbage-collect` on a
// registry of 1,000 images (bin/registry), pulls of
// one 10-layer image from a registry writing through sweepgate against the
// same from a registry on MinIO directly (pull times, the throughput ratio,
// a bare reverse proxy's and a TCP relay's ratios beside it, each path's
// CPU per pull by process, and the embedded etcd's reads per blob GET
// through sweepgate), and what
// one etcd cluster carries, embedded, of three members and as three shards
// (docs/envelope.md).
//
// Run them with `make bench` (go test -tags bench -run '^$' -bench .
// ./bench/...). They start one MinIO (bin/minio) and one sweepgate through
// e2e/harness. The figures go to stdout and, as JSON, to bench/results.json
// or the path in SWEEPGATE_BENCH_RESULTS. A figure below its target is printed as BELOW; it
// does not fail the run. Errors from S3 calls do.
//
// The package has no tests, only benchmarks, and its test files carry the
// build tag bench: `go test ./...` and `make test` do not build or run them.
package bench
