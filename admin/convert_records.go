package admin

import (
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// Conversions from the records in etcd (sessions, trash, orphan
// decisions) to the API's documents.

// summarize is the list's view of a session; act is its activity record,
// if any.
func summarize(s *etcdstore.Session, act *etcdstore.Activity, modRev int64) adminapi.Session {
	out := adminapi.Session{
		Bucket:        s.Bucket,
		Key:           s.Key,
		UploadID:      s.UploadID,
		Owner:         s.Owner,
		State:         string(s.State),
		StateSince:    s.Created,
		Created:       s.Created,
		LastActivity:  s.LastActivity,
		ExpiredAt:     s.ExpiredAt,
		Uncertain:     s.Uncertain,
		AbortAttempts: s.AbortAttempts,
		ModRevision:   modRev,
	}
	if n := len(s.History); n > 0 {
		out.StateSince = s.History[n-1].At
	}
	if act != nil && act.At.After(out.LastActivity) {
		out.LastActivity = act.At
	}
	return out
}

// detail is the show's view of a session, with its activity record (if
// any) and its parts.
func detail(s *etcdstore.Session, modRev int64, act *etcdstore.Activity, parts []etcdstore.Part) adminapi.SessionDetail {
	out := adminapi.SessionDetail{
		Session:      summarize(s, act, modRev),
		ExpectedETag: s.ExpectedETag,
		PartsDigest:  s.PartsDigest,
		History:      make([]adminapi.Transition, len(s.History)),
		PartCount:    len(parts),
		Parts:        make([]adminapi.Part, len(parts)),
	}
	if c := s.Completion; c != nil {
		out.Completion = &adminapi.Completion{
			Location: c.Location, Bucket: c.Bucket, Key: c.Key, ETag: c.ETag,
			VersionID: c.VersionID, Checksums: c.Checksums, At: c.At,
		}
		if out.Completion.Checksums == nil {
			out.Completion.Checksums = map[string]string{}
		}
	}
	if act != nil {
		out.Activity = &adminapi.Activity{At: act.At, What: act.What, PartNumber: act.Part}
	}
	for i, t := range s.History {
		out.History[i] = adminapi.Transition{At: t.At, From: string(t.From), To: string(t.To), Actor: t.Actor, Term: t.Term, Reason: t.Reason}
	}
	for i, p := range parts {
		out.Parts[i] = adminapi.Part{PartNumber: p.Number, ETag: p.ETag, Size: p.Size, SHA256: p.SHA256, At: p.At}
		out.PartBytes += p.Size
	}
	return out
}

// trashRecord is the view of a trash record, expired or not as of now.
func trashRecord(tr etcdstore.TrashRecord, now time.Time) adminapi.Trash {
	out := adminapi.Trash{Bucket: tr.Bucket, Key: tr.Key, Digests: tr.Digests, DeletedAt: tr.DeletedAt, Expires: tr.Expires,
		Principal: tr.Principal, Expired: !tr.Expires.After(now)}
	if out.Digests == nil {
		out.Digests = []string{}
	}
	return out
}

// fromOrphanRecord is the view of an operator's decision about an orphan.
func fromOrphanRecord(r etcdstore.OrphanRecord) adminapi.OrphanRecord {
	return adminapi.OrphanRecord{Action: string(r.Action), Bucket: r.Bucket, Key: r.Key, UploadID: r.UploadID, Principal: r.Principal,
		Term: r.Term, At: r.At, Parts: r.Parts, Bytes: r.Bytes, Outcome: r.Outcome}
}
