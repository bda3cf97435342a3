package admin

import (
	"fmt"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/sweep"
)

// Conversions from the reclaimer's pass reports, progress and leader to
// the API's documents, field by field.

func fromReport(in reclaim.Report) adminapi.Report {
	return adminapi.Report{
		Pass:          in.Pass,
		Term:          in.Term,
		DryRun:        in.DryRun,
		Started:       in.Started,
		Finished:      in.Finished,
		Refused:       in.Refused,
		Paused:        in.Paused,
		Restored:      in.Restored,
		Uploads:       fromUploads(in.Uploads),
		Stuck:         convertSlice(in.Stuck, fromStuck),
		Orphans:       convertSlice(in.Orphans, fromOrphan),
		Missing:       convertSlice(in.Missing, fromMissing),
		DeniedBuckets: in.DeniedBuckets,
		Stopped:       in.Stopped,
		Clock:         in.Clock,
		Revision:      in.Revision,
		Resumed:       in.Resumed,
		Breaker:       fromBreaker(in.Breaker),
		Acted:         fromActed(in.Acted),
		Vanished:      in.Vanished,
		Totals:        fromListTotals(in.Totals),
		Reconcile:     convertPtr(in.Reconcile, fromReconcileReport),
		Digests:       convertPtr(in.Digests, fromDigestReport),
		Slice:         convertPtr(in.Slice, fromSlice),
	}
}

func fromSlice(in sweep.Slice) adminapi.Slice {
	return adminapi.Slice{
		Budget:         in.Budget,
		Listed:         in.Listed,
		From:           in.From,
		To:             in.To,
		CompletedCycle: in.CompletedCycle,
		CycleStarted:   in.CycleStarted,
		Covered:        in.Covered,
		Cycles:         in.Cycles,
		Advanced:       in.Advanced,
	}
}

func fromCount(in reclaim.Count) adminapi.Count {
	return adminapi.Count{
		Sessions: in.Sessions,
		Parts:    in.Parts,
		Bytes:    in.Bytes,
	}
}

func fromUploads(in reclaim.Uploads) adminapi.Uploads {
	return adminapi.Uploads{
		Keep:   fromCount(in.Keep),
		Mark:   fromCount(in.Mark),
		Delete: fromCount(in.Delete),
		Hold:   fromCount(in.Hold),
	}
}

func fromStuck(in reclaim.Stuck) adminapi.Stuck {
	return adminapi.Stuck{
		Bucket:   in.Bucket,
		Key:      in.Key,
		UploadID: in.UploadID,
		Since:    in.Since,
	}
}

func fromOrphan(in reclaim.Orphan) adminapi.Orphan {
	return adminapi.Orphan{
		Bucket:    in.Bucket,
		Key:       in.Key,
		UploadID:  in.UploadID,
		Initiated: in.Initiated,
		Parts:     in.Parts,
		Bytes:     in.Bytes,
	}
}

func fromMissing(in reclaim.Missing) adminapi.Missing {
	return adminapi.Missing{
		Bucket:       in.Bucket,
		Key:          in.Key,
		UploadID:     in.UploadID,
		State:        string(in.State),
		LastActivity: in.LastActivity,
	}
}

func fromBreaker(in reclaim.Breaker) adminapi.Breaker {
	return adminapi.Breaker{
		DeleteParts:              in.DeleteParts,
		StoredParts:              in.StoredParts,
		MaxDelete:                in.MaxDelete,
		MaxDeleteFraction:        in.MaxDeleteFraction,
		DeleteUploads:            in.DeleteUploads,
		StoredUploads:            in.StoredUploads,
		MaxDeleteUploads:         in.MaxDeleteUploads,
		MaxDeleteUploadsFraction: in.MaxDeleteUploadsFraction,
		MarkUploads:              in.MarkUploads,
		MaxMark:                  in.MaxMark,
		MaxMarkFraction:          in.MaxMarkFraction,
	}
}

func fromActed(in reclaim.Acted) adminapi.Acted {
	return adminapi.Acted{
		Marked:         fromCount(in.Marked),
		Intents:        fromCount(in.Intents),
		Deleted:        fromCount(in.Deleted),
		CleanupPending: fromCount(in.CleanupPending),
		Changed:        fromCount(in.Changed),
		AroundGateway:  fromCount(in.AroundGateway),
		Unread:         fromCount(in.Unread),
	}
}

func fromListTotals(in reclaim.ListTotals) adminapi.ListTotals {
	return adminapi.ListTotals{
		Stuck:             in.Stuck,
		Orphans:           in.Orphans,
		Missing:           in.Missing,
		MissingUnverified: in.MissingUnverified,
		Unlisted:          in.Unlisted,
	}
}

func fromReconcileReport(in multipart.ReconcileReport) adminapi.ReconcileReport {
	return adminapi.ReconcileReport{
		Revision:  in.Revision,
		Scanned:   in.Scanned,
		Examined:  in.Examined,
		Young:     in.Young,
		Aborted:   in.Aborted,
		Completed: in.Completed,
		Retried:   in.Retried,
		Stuck:     in.Stuck,
		Flagged:   in.Flagged,
		Pruned:    in.Pruned,
		Conflicts: in.Conflicts,
		Deferred:  in.Deferred,
		Errors:    in.Errors,
	}
}

func fromProgress(in reclaim.Progress) adminapi.Progress {
	return adminapi.Progress{
		Pass:    in.Pass,
		Term:    in.Term,
		Phase:   in.Phase,
		Bucket:  in.Bucket,
		Started: in.Started,
		DryRun:  in.DryRun,
		Uploads: fromUploads(in.Uploads),
		Acted:   fromActed(in.Acted),
		Digests: convertPtr(in.Digests, fromDigestProgress),
	}
}

func fromLeader(in reclaim.LeaderInfo) adminapi.Leader {
	return adminapi.Leader{
		ID:   in.ID,
		Term: in.Term,
	}
}

// fillLists makes a report's lists empty instead of null, as every answer
// shows them.
func fillLists(rep *adminapi.Report) {
	if rep.Stuck == nil {
		rep.Stuck = []adminapi.Stuck{}
	}
	if rep.Orphans == nil {
		rep.Orphans = []adminapi.Orphan{}
	}
	if rep.Missing == nil {
		rep.Missing = []adminapi.Missing{}
	}
}

// reclaimerStatus is this process's reclaimer as info describes it and
// its status says.
func reclaimerStatus(info ReclaimerInfo, st reclaim.Status) adminapi.Reclaimer {
	return adminapi.Reclaimer{
		ID: info.ID, Enabled: info.Enabled, DryRun: info.DryRun,
		Leading: st.Leading, Term: st.Term, Leader: convertPtr(st.Leader, fromLeader),
	}
}

func fromPause(in etcdstore.Pause) adminapi.Pause {
	return adminapi.Pause{Sweep: in.Sweep, Reason: in.Reason, Compared: in.Compared, Pass: in.Pass, Term: in.Term, At: in.At}
}

func fromResumed(in reclaim.Resumed) adminapi.ResumeResult {
	out := adminapi.ResumeResult{Sweep: in.Sweep, Resumed: in.Lifted != nil, Lifted: convertPtr(in.Lifted, fromPause)}
	if in.Lifted == nil {
		out.Message = "the " + in.Sweep + " sweep is not paused: nothing to resume, nothing changed"
	} else {
		out.Message = fmt.Sprintf("the %s sweep is resumed: the pause of pass %d is lifted, and the leader's next pass may act", in.Sweep, in.Lifted.Pass)
	}
	return out
}

func toOrphanRef(r adminapi.OrphanRef) reclaim.OrphanRef {
	return reclaim.OrphanRef{Bucket: r.Bucket, Key: r.Key, UploadID: r.UploadID}
}

func fromOrphanResult(r reclaim.OrphanResult) adminapi.OrphanResult {
	return adminapi.OrphanResult{Bucket: r.Bucket, Key: r.Key, UploadID: r.UploadID, Parts: r.Parts, Bytes: r.Bytes,
		Outcome: r.Outcome, Uncertain: r.Uncertain, Deleted: r.Deleted}
}

func fromRestored(in etcdstore.Restored) adminapi.RestoreMark {
	return adminapi.RestoreMark{Revision: in.Rev, Reason: in.Reason, DetectedAt: in.DetectedAt, Term: in.Term, By: in.By,
		Cleared: in.Cleared, ClearedWhy: in.ClearedWhy}
}
