package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ArmGuard arms g's digest's guard for a delete the gateway sends on a
// client's behalf, recording g (with the attempt it is about to send) only
// if no guard is armed for the digest and no reference hold exists (a
// complete into a source whose references are not recorded yet): while it
// stands, every reference write naming the digest, and every new hold, is
// refused, so a reference check made after it cannot be overtaken by a
// write. It returns the guard's mod revision, or ErrGuarded when a guard
// or a hold was there already.
func (s *Store) ArmGuard(ctx context.Context, g Guard) (int64, error) {
	key := s.keys.Guard(g.Digest)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(s.keys.RefHolds()), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(key, MarshalRecord(g))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("arm guard: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrGuarded
	}
	return resp.Header.Revision, nil
}

// ReleaseGuard releases digest's guard if it is still as armed at
// revision rev; a guard changed since (taken over by a pass) is left as
// it is.
func (s *Store) ReleaseGuard(ctx context.Context, digest string, rev int64) error {
	key := s.keys.Guard(digest)
	if _, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).
		Commit(); err != nil {
		return fmt.Errorf("release guard: %w", err)
	}
	return nil
}

// UnrecordedWrite records a complete of a multipart upload into a
// reference source whose object's references may not be recorded: written
// with the complete's hold, deleted once they are. While one stands no
// guard is armed anywhere; the digest sweep deletes it only once it is
// settled (its hold gone and the record written again after that) and a
// rebuild that started after that write has read every source.
type UnrecordedWrite struct {
	Version int       `json:"v"`
	ID      string    `json:"id"`
	Bucket  string    `json:"bucket"`
	Key     string    `json:"key"`
	At      time.Time `json:"at"`
	// Settled says the record was written again after the complete's
	// hold ended (by the gateway that failed to record the references,
	// or by a pass that found the hold lapsed): its mod revision is after
	// any write of the object.
	Settled bool   `json:"settled,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// EndUnrecorded deletes the record of the complete id: its object's
// references are recorded, or it made no object.
func (s *Store) EndUnrecorded(ctx context.Context, id string) error {
	if _, err := s.cli.Delete(ctx, s.keys.UnrecordedOf(id)); err != nil {
		return fmt.Errorf("end unrecorded write: %w", err)
	}
	return nil
}

// SettleUnrecorded writes the record of the complete id again, settled,
// with why its references are not recorded: its object stays unread until
// a rebuild that starts after this write.
func (s *Store) SettleUnrecorded(ctx context.Context, u UnrecordedWrite, why string) error {
	u.Settled, u.Reason = true, why
	if _, err := s.cli.Put(ctx, s.keys.UnrecordedOf(u.ID), MarshalRecord(u)); err != nil {
		return fmt.Errorf("settle unrecorded write: %w", err)
	}
	return nil
}
