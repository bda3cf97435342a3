//go:build integration

package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// requireWritten checks that digest's only placement is the record of its
// latest finished write, made at the clock's time.
func (e *digestEnv) requireWritten(digest string) {
	e.t.Helper()
	resp, err := e.store.Client().Get(e.t.Context(), e.store.Keys().Placements(digest), clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || !strings.HasSuffix(string(resp.Kvs[0].Key), "/written") {
		e.t.Fatalf("placements of %s after its write: %d keys %v; want the written record only", digest, len(resp.Kvs), resp.Kvs)
	}
	var p etcdstore.Placement
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		e.t.Fatal(err)
	}
	if !p.Written || !p.At.Equal(e.clock.Now()) {
		e.t.Fatalf("written record of %s = %+v; want written at %v", digest, p, e.clock.Now())
	}
}

// TestDigestsBlobWrittenAgainIsYoung writes a stored blob again through the
// gateway ten minutes later (a producer that believes it uploaded the blob
// now): the blob's placement record must move to the second write, so the
// placement grace runs from it whatever the stored copy's modification
// time.
func TestDigestsBlobWrittenAgainIsYoung(t *testing.T) {
	e := newDigestEnv(t)
	content := "a layer pushed twice"
	d, key := blob(content)
	e.mustPut(e.alice, regBucket, key, []byte(content))
	e.requireWritten(d)
	e.clock.mu.Lock()
	e.clock.now = e.clock.now.Add(10 * time.Minute)
	e.clock.mu.Unlock()
	e.mustPut(e.alice, regBucket, key, []byte(content))
	e.requireWritten(d)
}
