// Package etcdstore is sweepgate's storage layer over etcd: starting an
// embedded server, connecting a client and proving the cluster answers,
// the layout of the keys under sweepgate's prefix (Keys), the records
// stored under them with their JSON encodings, and the typed reads and
// single-record compare-and-put transactions every domain shares.
//
// The transactions that carry a domain's rules are built by that domain
// from these keys and records: the session state machine's in multipart,
// the digest sweep's (fenced by the reclaimer's term) in digestsweep, the
// upload sweep's in reclaim. So a reader finds why a record changed in the
// package that owns the decision, and what the record is here.
//
// It imports nothing else from sweepgate so that every other package can
// depend on it without cycles.
package etcdstore
