package multipart

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// InFlightTTL is the lease of the records of parts in flight: how long such
// a record outlives a gateway that stopped renewing it (it died, or lost
// etcd), after which its part no longer keeps the upload alive.
const InFlightTTL = 5 * time.Second

// flights holds the one lease a gateway process puts the records of its
// parts in flight under, kept alive while the process runs. A lease that
// ends (etcd lost it) is replaced by the next part that needs one.
type flights struct {
	cli *clientv3.Client
	// timeout bounds a grant (etcd.request_timeout): parts wait on it.
	timeout time.Duration
	mu      sync.Mutex
	id      clientv3.LeaseID
	// onLost learns of each lease that ended, after it is forgotten.
	onLost func(clientv3.LeaseID)
}

// lease returns the live lease, granting one if there is none.
func (f *flights) lease(ctx context.Context) (clientv3.LeaseID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.id != 0 {
		return f.id, nil
	}
	gctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	g, err := f.cli.Grant(gctx, int64(InFlightTTL/time.Second))
	if err != nil {
		return 0, err
	}
	// The keep-alive outlives the request that granted the lease; it ends
	// when the lease or the client does.
	ch, err := f.cli.KeepAlive(context.WithoutCancel(ctx), g.ID)
	if err != nil {
		return 0, err
	}
	f.id = g.ID
	go func() {
		for range ch {
		}
		f.lost(g.ID)
	}()
	return g.ID, nil
}

// lost forgets lease id, so the next part grants a new one, and tells
// onLost that the records under it are gone.
func (f *flights) lost(id clientv3.LeaseID) {
	f.mu.Lock()
	if f.id == id {
		f.id = 0
	}
	f.mu.Unlock()
	if f.onLost != nil {
		f.onLost(id)
	}
}

// holds reports whether id is the live lease.
func (f *flights) holds(id clientv3.LeaseID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return id != 0 && f.id == id
}

// leaseGone reports whether err says a write named a lease etcd no longer
// has.
func leaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// newFlightID returns a random id for one part in flight.
func newFlightID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// endPart records the end of a part begun under f, and with part set the
// part the backend accepted, in one transaction: the part's end is
// activity too, written on the same terms as its start (on an active
// session the activity key, or from schema 2 the part record alone; on an
// expired one a move back to active). A part under its own in-flight
// record (schema 1) removes the record in the same transaction; a part
// under its upload's lingering record (schema 2) leaves it, and once the
// transaction is done counts itself out of it (lingering.release), the
// record being removed after PartLinger with no part in flight. A session
// that moved on meanwhile (completing, aborting) gets no stamp, only the
// record's removal and the part. Nothing here changes the client's
// answer: the part is on the backend and the client gets its ETag, and
// the record informs reports and the reclaimer's activity, so a failure
// is logged, and the in-flight record's lease ends it at the latest.
func (s *Service) endPart(ctx context.Context, c *Call, n int, f partFlight, part *etcdstore.Part) {
	if f.held != nil {
		defer s.held.release(c.UploadID, f.held)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	var ops []clientv3.Op
	if f.held == nil {
		ops = append(ops, s.store.EndInFlightOp(c.UploadID, f.id))
	}
	if part != nil {
		ops = append(ops, s.store.PartOp(c.UploadID, *part))
	}
	act := etcdstore.Activity{At: s.now().UTC(), What: string(c.Op) + " ended", Part: n}
	for i := range s.attempts {
		v, found, err := s.partSession(ctx, c, f, i)
		if err != nil || !found || (v.Value.State != etcdstore.StateActive && v.Value.State != etcdstore.StateExpired) {
			if len(ops) == 0 {
				return
			}
			bctx, bcancel := s.bounded(ctx)
			_, derr := s.store.Client().Txn(bctx).Then(ops...).Commit()
			bcancel()
			if derr != nil {
				s.log.Warn("end of part not recorded; its lease clears the part in flight", "id", c.RequestID, "upload_id", c.UploadID, "part", n, "recorded", part != nil, "err", derr)
			}
			return
		}
		if part != nil {
			err = s.stampPart(ctx, c, v, act, ops...)
		} else {
			err = s.stamp(ctx, c, v, act, ops...)
		}
		if errors.Is(err, etcdstore.ErrConflict) {
			s.metrics.conflicts.Inc()
			continue
		}
		if err != nil {
			s.log.Warn("end of part not recorded; its lease clears the part in flight", "id", c.RequestID, "upload_id", c.UploadID, "part", n, "recorded", part != nil, "err", err)
		}
		return
	}
	s.log.Warn("end of part not recorded: the session changed too often", "id", c.RequestID, "upload_id", c.UploadID, "part", n, "recorded", part != nil)
}

// partSession is the session the end of a part begun under f decides
// from in its attempt i: the one its start read, in the first attempt
// when there is one (a transaction that compares it fails if it changed
// since, and the next attempt reads it), and otherwise as read now.
func (s *Service) partSession(ctx context.Context, c *Call, f partFlight, i int) (etcdstore.Versioned[etcdstore.Session], bool, error) {
	if i == 0 && f.sess != nil {
		return *f.sess, true, nil
	}
	return s.loadSession(ctx, c)
}
