package multipart

import (
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

func TestListedFor(t *testing.T) {
	enforced := &Service{owners: true, admins: []string{"ops"}}
	shared := &Service{owners: false}
	for _, tc := range []struct {
		name      string
		s         *Service
		principal string
		state     etcdstore.SessionState
		want      bool
	}{
		{"owner", enforced, "alice", etcdstore.StateActive, true},
		{"owner, expired", enforced, "alice", etcdstore.StateExpired, true},
		{"owner, completing", enforced, "alice", etcdstore.StateCompleting, true},
		{"other principal", enforced, "bob", etcdstore.StateActive, false},
		{"other principal, expired", enforced, "bob", etcdstore.StateExpired, false},
		{"admin principal", enforced, "ops", etcdstore.StateActive, true},
		{"owner, aborting", enforced, "alice", etcdstore.StateAborting, false},
		{"admin, aborted", enforced, "ops", etcdstore.StateAborted, false},
		{"ownership off", shared, "bob", etcdstore.StateActive, true},
		{"ownership off, cleanup pending", shared, "bob", etcdstore.StateCleanupPending, false},
	} {
		sess := &etcdstore.Session{Owner: "alice", State: tc.state}
		if got := tc.s.listedFor(tc.principal, sess); got != tc.want {
			t.Errorf("%s: listedFor(%s) = %v, want %v", tc.name, tc.principal, got, tc.want)
		}
	}
}
