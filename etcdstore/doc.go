// Package etcdstore holds everything sweepgate knows about etcd: starting an
// embedded server, connecting a client, proving the cluster answers, and the
// layout of the keys under sweepgate's prefix.
//
// It imports nothing else from sweepgate so that every other package can
// depend on it without cycles.
package etcdstore
