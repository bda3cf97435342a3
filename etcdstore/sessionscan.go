package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultScanPage is the page size of a scan when none is given: large
// enough that a scan of many sessions takes few round trips, small enough
// that one page stays far below etcd's response size limit.
const defaultScanPage = 500

// maxTxnOps is etcd's default limit on the operations of one transaction.
const maxTxnOps = 128

// SessionScan selects the sessions ScanSessionsAfter reads.
type SessionScan struct {
	// Bucket limits the scan to one bucket; empty scans every bucket.
	Bucket string
	// AfterBucket and AfterUploadID resume a scan after that session (which
	// need not exist any more); both empty start at the beginning.
	AfterBucket, AfterUploadID string
	// PageSize is how many keys one request reads; 0 means 500.
	PageSize int64
}

// ScanSessionsAfter is ScanSessions for a caller that reads sessions a page
// at a time (the admin API): it starts after a given session, and fn
// returning false ends the scan, so listing the next few sessions reads
// neither those before nor those after them. Sessions come in key order
// (bucket, then upload id, both as escaped in the key) at one etcd revision,
// which it returns. A session whose record does not decode, or is of a
// newer release's layout, is passed over, so that one such record does not
// hide the others; its key is returned in undecodable.
func (s *Store) ScanSessionsAfter(ctx context.Context, scan SessionScan, fn func(Versioned[Session]) bool) (rev int64, undecodable []string, err error) {
	prefix := s.keys.AllSessions()
	if scan.Bucket != "" {
		prefix = s.keys.Sessions(scan.Bucket)
	}
	start, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	if scan.AfterBucket != "" || scan.AfterUploadID != "" {
		if after := s.keys.Session(scan.AfterBucket, scan.AfterUploadID) + "\x00"; after > start {
			start = after
		}
	}
	if start >= end {
		// Resuming after the selected range: nothing is left, but the caller
		// still learns the revision it looked at.
		resp, err := s.cli.Get(ctx, prefix, clientv3.WithCountOnly())
		if err != nil {
			return 0, nil, fmt.Errorf("scan sessions: %w", err)
		}
		return resp.Header.Revision, nil, nil
	}
	rev, err = s.rangeScan(ctx, start, end, 0, scan.PageSize, func(kv *mvccpb.KeyValue) bool {
		var sess Session
		if err := DecodeKV(SessionRecord, kv, &sess); err != nil {
			undecodable = append(undecodable, string(kv.Key))
			return true
		}
		return fn(Versioned[Session]{Value: sess, ModRev: kv.ModRevision})
	})
	if err != nil {
		return 0, nil, err
	}
	return rev, undecodable, nil
}

// SessionStates counts the sessions in each state, reading every session at
// one etcd revision, which it returns. It decodes only each record's state,
// and skips (and counts as undecodable) a record that has none, so that one
// damaged record cannot stop the count.
func (s *Store) SessionStates(ctx context.Context, pageSize int64) (counts map[SessionState]int64, undecodable int, rev int64, err error) {
	counts = make(map[SessionState]int64, len(AllStates))
	prefix := s.keys.AllSessions()
	rev, err = s.rangeScan(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), 0, pageSize, func(kv *mvccpb.KeyValue) bool {
		if st, err := SessionStateOf(kv.Value); err != nil {
			undecodable++
		} else {
			counts[st]++
		}
		return true
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return counts, undecodable, rev, nil
}

// SessionStateOf reads only the state of an encoded session record, for
// callers that follow session keys (a watch) and need no more.
func SessionStateOf(value []byte) (SessionState, error) {
	var v struct {
		State SessionState `json:"state"`
	}
	if err := json.Unmarshal(value, &v); err != nil {
		return "", fmt.Errorf("decode session state: %w", err)
	}
	if v.State == "" {
		return "", errors.New("decode session state: record has no state")
	}
	return v.State, nil
}

// GetActivities reads the recorded activity of each upload, for listing:
// its activity key's, or the end of its most recently written part record
// when that is later (UploadState.RecordedActivity judges by every part
// record; the most recently written one is the newest but right after a
// migration, which rewrote them all). Uploads with neither are absent
// from the map.
func (s *Store) GetActivities(ctx context.Context, uploadIDs []string) (map[string]Activity, error) {
	out := make(map[string]Activity, len(uploadIDs))
	for len(uploadIDs) > 0 {
		batch := uploadIDs[:min(len(uploadIDs), maxTxnOps/2)]
		uploadIDs = uploadIDs[len(batch):]
		ops := make([]clientv3.Op, 0, 2*len(batch))
		for _, id := range batch {
			ops = append(ops, clientv3.OpGet(s.keys.Activity(id)),
				clientv3.OpGet(s.keys.Parts(id), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1)))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read activity: %w", err)
		}
		for i, id := range batch {
			var act *Activity
			if kvs := resp.Responses[2*i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				var a Activity
				if err := DecodeKV(ActivityRecord, kvs[0], &a); err != nil {
					return nil, err
				}
				act = &a
			}
			var last Part
			if kvs := resp.Responses[2*i+1].GetResponseRange().GetKvs(); len(kvs) > 0 {
				if last, err = DecodePart(string(kvs[0].Key), kvs[0].Value); err != nil {
					return nil, err
				}
			}
			if act = NewestActivity(act, last); act != nil {
				out[id] = *act
			}
		}
	}
	return out, nil
}
