package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Snapshot saves a snapshot of the cluster's data through member 0's
// Maintenance Snapshot API (what `etcdctl snapshot save` does) into a file
// of t's temporary directory, and returns its path.
func (c *EtcdCluster) Snapshot(t testing.TB) string {
	t.Helper()
	cli := c.MemberClient(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatalf("harness: etcd snapshot: %v", err)
	}
	defer rc.Close()
	path := filepath.Join(t.TempDir(), "etcd-snapshot.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		t.Fatalf("harness: etcd snapshot: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return path
}

// RestoreFrom stops every member, restores each from the snapshot at path
// into a new data directory the way `etcdutl snapshot restore` does (the
// same etcdutl code: --name, --initial-cluster, --initial-advertise-peer-urls,
// --bump-revision bump, --mark-compacted), and starts the members on their
// old ports from the restored directories, waiting until the cluster takes
// writes. What was written after the snapshot is gone; revisions go on
// from the snapshot's plus bump, and every older one reads as compacted.
func (c *EtcdCluster) RestoreFrom(t testing.TB, path string, bump uint64) {
	t.Helper()
	for _, m := range c.members {
		if err := c.stopMember(m); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	for _, m := range c.members {
		dir := filepath.Join(filepath.Dir(filepath.Dir(m.dataDir)), "restored", m.name)
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			t.Fatalf("harness: %v", err)
		}
		err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
			SnapshotPath:        path,
			Name:                m.name,
			OutputDataDir:       dir,
			PeerURLs:            []string{m.peerURL},
			InitialCluster:      c.initial,
			InitialClusterToken: "etcdmember", // cmd/etcdmember's default
			RevisionBump:        bump,
			MarkCompacted:       true,
		})
		if err != nil {
			t.Fatalf("harness: restore etcdmember %s from %s: %v", m.name, path, err)
		}
		m.dataDir = dir
	}
	offsets := make([]int64, len(c.members))
	for i, m := range c.members {
		offsets[i] = fileSize(m.logFile)
		if err := c.startMember(m, "new"); err != nil {
			t.Fatalf("harness: start restored etcdmember %s: %v", m.name, err)
		}
	}
	for i, m := range c.members {
		if err := c.awaitReady(m, offsets[i]); err != nil {
			t.Fatalf("harness: restored etcdmember %s: %v", m.name, err)
		}
		if err := checkHolders(m.holders()); err != nil {
			t.Fatalf("harness: restored etcdmember %s does not hold its ports: %v", m.name, err)
		}
	}
	if err := c.awaitWritable(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("harness: restored etcd cluster: %v", err)
	}
}
