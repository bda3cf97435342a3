package multipart

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// PartLinger is how long, from keyspace schema 2, a gateway keeps an
// upload's in-flight record after the last of its parts on this gateway
// ended, so that the next part reuses it instead of writing its own. It is
// the in-flight lease's TTL: a record outlives its last part by at most
// what a record of a gateway that died outlives its part already, so the
// reclaimer (which keeps an upload while any record exists, for hours of
// grace) meets nothing it did not meet before, and a client that sends
// parts one after another, a few milliseconds apart, meets one record per
// burst.
const PartLinger = InFlightTTL

// held is one upload's lingering in-flight record on this gateway. Its
// fields but wmu are guarded by lingering.mu.
type held struct {
	// wmu is held while a part writes a new instance of the record, so
	// that parallel parts of one upload write one, not one each.
	wmu sync.Mutex
	// id is the instance of the record the gateway wrote and believes is
	// there ("" when none is known): a random id, so the removal of one
	// instance can never remove another.
	id    string
	lease clientv3.LeaseID
	// parts counts the parts that took this entry and have not ended; the
	// record is not removed while any has not.
	parts int
	// stop cancels the pending removal, nil when none is pending; gen
	// numbers the removals scheduled, so a removal that fires after it was
	// cancelled does nothing.
	stop func() bool
	gen  uint64
}

// lingering is the gateway's in-process table of the in-flight records it
// holds, by upload id. An entry is removed, and its record deleted, when
// no part took it for PartLinger, so the table holds only the uploads
// with parts in flight or ended within the linger.
type lingering struct {
	mu    sync.Mutex
	m     map[string]*held
	after func(time.Duration, func()) func() bool
	// remove deletes one instance of the record.
	remove func(uploadID, id string, lease clientv3.LeaseID)
}

// take returns the entry of uploadID, made if there is none, counting one
// more part in flight under it and cancelling its pending removal.
func (l *lingering) take(uploadID string) *held {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.m[uploadID]
	if h == nil {
		h = &held{}
		l.m[uploadID] = h
	}
	h.parts++
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
	return h
}

// release counts a part of h as ended; the last one schedules the
// removal of the record after PartLinger.
func (l *lingering) release(uploadID string, h *held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.parts--
	if h.parts > 0 || l.m[uploadID] != h {
		return
	}
	h.gen++
	gen := h.gen
	h.stop = l.after(PartLinger, func() { l.expire(uploadID, h, gen) })
}

// expire removes h, when no part took it since the removal numbered gen
// was scheduled, and deletes its record. A part that comes after makes a
// new entry and writes a new instance.
func (l *lingering) expire(uploadID string, h *held, gen uint64) {
	l.mu.Lock()
	if l.m[uploadID] != h || h.parts > 0 || h.stop == nil || h.gen != gen {
		l.mu.Unlock()
		return
	}
	delete(l.m, uploadID)
	id, lease := h.id, h.lease
	l.mu.Unlock()
	if id != "" {
		l.remove(uploadID, id, lease)
	}
}

// current returns the instance of the record h believes is there.
func (l *lingering) current(h *held) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return h.id
}

// set records that instance id of h's record is written under lease.
func (l *lingering) set(h *held, id string, lease clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h.id, h.lease = id, lease
}

// leaseLost forgets every instance written under lease: etcd removed them
// with it, and the next part writes a new one.
func (l *lingering) leaseLost(lease clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.m {
		if h.lease == lease {
			h.id, h.lease = "", 0
		}
	}
}

// HeldRecords is how many uploads the service holds an in-flight record
// for (keyspace schema 2): those with parts in flight through it, or
// ended within PartLinger.
func (s *Service) HeldRecords() int {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	return len(s.held.m)
}

// partFlight is the in-flight record a part streams under: its own (held
// nil), which the part's end deletes, or its upload's lingering one.
type partFlight struct {
	id   string
	held *held
	// sess is the session as the part's start read it, when it wrote
	// nothing: the part's end compares it first, and reads the session
	// again only when it changed since.
	sess *etcdstore.Versioned[etcdstore.Session]
}

// beginPart records a part's start before its bytes go to the backend. In
// keyspace schema 1 it writes the part's own in-flight record with its
// activity (recordActivity). From schema 2 the part takes its upload's
// lingering record (beginHeld). found is false when the upload has no
// session.
func (s *Service) beginPart(ctx context.Context, c *Call, n int) (partFlight, bool, error) {
	if s.store.WritesSchema() < 2 {
		f := partFlight{id: newFlightID()}
		found, _, err := s.recordActivity(ctx, c, n, f.id)
		return f, found, err
	}
	h := s.held.take(c.UploadID)
	f, found, err := s.beginHeld(ctx, c, n, h)
	if err != nil || !found {
		s.held.release(c.UploadID, h)
	}
	return f, found, err
}

// beginHeld starts a part under its upload's lingering record h. When h
// has a record, one read-only transaction checks that the session is
// active, that the caller may act on it, and that the record is still
// there (its lease may have ended): then the record covers the part as
// one the part wrote would, and nothing is committed. Otherwise the part
// decides and writes as recordActivity does for a part of its own (the
// session compared, a new instance of the record under the lease, the
// old one deleted in the same transaction), so a session that moved on or
// another principal's part is refused exactly as then.
func (s *Service) beginHeld(ctx context.Context, c *Call, n int, h *held) (partFlight, bool, error) {
	for range s.attempts {
		seen := s.held.current(h)
		if seen != "" {
			v, ok, err := s.store.SessionHolding(ctx, c.Bucket, c.UploadID, seen)
			if err != nil && !errors.Is(err, etcdstore.ErrNotFound) {
				return partFlight{}, true, err
			}
			if err == nil && ok && v.Value.Key == c.Key && v.Value.State == etcdstore.StateActive && s.mayAct(c.Principal, &v.Value) {
				return partFlight{id: seen, held: h, sess: &v}, true, nil
			}
		}
		h.wmu.Lock()
		if s.held.current(h) != seen {
			// Another part of the upload wrote an instance meanwhile.
			h.wmu.Unlock()
			continue
		}
		id := newFlightID()
		var also []clientv3.Op
		if seen != "" {
			also = append(also, s.store.EndInFlightOp(c.UploadID, seen))
		}
		found, lease, err := s.recordActivity(ctx, c, n, id, also...)
		if err == nil && found {
			s.held.set(h, id, lease)
		}
		h.wmu.Unlock()
		return partFlight{id: id, held: h}, found, err
	}
	return partFlight{}, true, errTooManyConflicts
}

// removeHeld deletes instance id of an upload's lingering record. A
// failed delete is tried again after PartLinger for as long as the lease
// it was written under is the gateway's: the record's id is its own, so a
// late delete removes nothing else, and once the lease is gone so is the
// record.
func (s *Service) removeHeld(uploadID, id string, lease clientv3.LeaseID) {
	ctx, cancel := s.bounded(context.Background())
	defer cancel()
	_, err := s.store.Client().Delete(ctx, s.store.Keys().InFlightPart(uploadID, id))
	if err == nil || !s.flights.holds(lease) {
		return
	}
	s.log.Warn("lingering in-flight record not removed; tried again later", "upload_id", uploadID, "err", err)
	s.held.after(PartLinger, func() { s.removeHeld(uploadID, id, lease) })
}
