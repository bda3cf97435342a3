package admin

import (
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/digestsweep"
)

// Conversions from the reclaimer's digest sweep reports, progress and
// digest explanations to the API's documents, field by field. Every
// reference of this package to the reclaimer's digest types is here.

func fromDigestReport(in digestsweep.Report) adminapi.DigestReport {
	return adminapi.DigestReport{
		Pending:         in.Pending,
		Ready:           in.Ready,
		Skipped:         in.Skipped,
		Deleted:         in.Deleted,
		Bytes:           in.Bytes,
		Stored:          in.Stored,
		StoredBytes:     in.StoredBytes,
		ReadyBytes:      in.ReadyBytes,
		Retained:        in.Retained,
		RetainedBy:      in.RetainedBy,
		NewPending:      in.NewPending,
		Changed:         in.Changed,
		Ignored:         in.Ignored,
		Duplicates:      in.Duplicates,
		Failed:          in.Failed,
		Unknown:         in.Unknown,
		Settling:        in.Settling,
		FutureTimes:     in.FutureTimes,
		Guards:          in.Guards,
		Released:        in.Released,
		StalePlacements: in.StalePlacements,
		DeniedBuckets:   in.DeniedBuckets,
		Refused:         in.Refused,
		Paused:          in.Paused,
		Kept:            in.Kept,
		Revision:        in.Revision,
		Resumed:         in.Resumed,
		Breaker:         fromDigestBreaker(in.Breaker),
		Rebuild:         fromDigestRebuild(in.Rebuild),
		Pruned:          fromPruned(in.Pruned),
		Tombstones:      stringKeys(in.Tombstones),
		Slice:           convertPtr(in.Slice, fromSlice),
	}
}

func fromDigestBreaker(in digestsweep.Breaker) adminapi.DigestBreaker {
	return adminapi.DigestBreaker{
		DeleteBlobs:       in.DeleteBlobs,
		StoredBlobs:       in.StoredBlobs,
		MaxDelete:         in.MaxDelete,
		MaxDeleteFraction: in.MaxDeleteFraction,
		MarkBlobs:         in.MarkBlobs,
		MaxMark:           in.MaxMark,
		MaxMarkFraction:   in.MaxMarkFraction,
	}
}

func fromDigestRebuild(in digestsweep.RebuildReport) adminapi.DigestRebuild {
	return adminapi.DigestRebuild{
		Ran:    in.Ran,
		NotRun: in.NotRun,
		Failed: in.Failed,
		Result: convertPtr(in.Result, fromRebuildResult),
		Last:   in.Last,
	}
}

func fromPruned(in digestsweep.Pruned) adminapi.Pruned {
	return adminapi.Pruned{
		Tombstones: in.Tombstones,
		Trash:      in.Trash,
		Placements: in.Placements,
	}
}

func fromRebuildResult(in digestsweep.RebuildResult) adminapi.RebuildResult {
	return adminapi.RebuildResult{
		Objects:     in.Objects,
		Read:        in.Read,
		Unknown:     in.Unknown,
		UnknownRefs: in.UnknownRefs,
		Settled:     in.Settled,
		Stale:       in.Stale,
	}
}

func fromDigestProgress(in digestsweep.Progress) adminapi.DigestProgress {
	return adminapi.DigestProgress{
		Phase:  in.Phase,
		Report: fromDigestReport(in.Report),
	}
}

func fromDigestExplanation(in digestsweep.DigestExplanation) adminapi.DigestExplanation {
	return adminapi.DigestExplanation{
		Digest:           in.Digest,
		Now:              in.Now,
		Revision:         in.Revision,
		NextPass:         in.NextPass,
		Verdict:          in.Verdict,
		Reason:           in.Reason,
		DryRun:           in.DryRun,
		PlacementGrace:   in.PlacementGrace,
		Blob:             convertPtr(in.Blob, fromExplainBlob),
		Copies:           convertSlice(in.Copies, fromExplainBlob),
		Steps:            convertSlice(in.Steps, fromStep),
		References:       convertSlice(in.References, fromExplainRef),
		Trash:            convertSlice(in.Trash, fromExplainTrash),
		Placements:       convertSlice(in.Placements, fromExplainPlacement),
		Shard:            in.Shard,
		ShardRefRevision: in.ShardRefRevision,
		ReferenceHolds:   in.ReferenceHolds,
		Tombstone:        convertPtr(in.Tombstone, fromExplainTombstone),
		RequiredFrontier: in.RequiredFrontier,
		Planes:           convertSlice(in.Planes, fromExplainPlane),
		Guard:            convertPtr(in.Guard, fromExplainGuard),
		LastPass:         convertPtr(in.LastPass, fromPassSummary),
		Notes:            in.Notes,
	}
}

func fromExplainBlob(in digestsweep.ExplainBlob) adminapi.ExplainBlob {
	return adminapi.ExplainBlob{
		Namespace: in.Namespace,
		Bucket:    in.Bucket,
		Key:       in.Key,
		Size:      in.Size,
		Modified:  in.Modified,
		Age:       in.Age,
	}
}

func fromExplainRef(in digestsweep.ExplainRef) adminapi.ExplainRef {
	return adminapi.ExplainRef{
		Bucket:   in.Bucket,
		Key:      in.Key,
		Source:   in.Source,
		At:       in.At,
		Pending:  in.Pending,
		Dirty:    in.Dirty,
		Restored: in.Restored,
		Unknown:  in.Unknown,
	}
}

func fromExplainTrash(in digestsweep.ExplainTrash) adminapi.ExplainTrash {
	return adminapi.ExplainTrash{
		Bucket:    in.Bucket,
		Key:       in.Key,
		DeletedAt: in.DeletedAt,
		Expires:   in.Expires,
		Expired:   in.Expired,
		Principal: in.Principal,
	}
}

func fromExplainPlacement(in digestsweep.ExplainPlacement) adminapi.ExplainPlacement {
	return adminapi.ExplainPlacement{
		ID:     in.ID,
		Bucket: in.Bucket,
		Key:    in.Key,
		At:     in.At,
		Age:    in.Age,
		Stale:  in.Stale,
	}
}

func fromExplainTombstone(in digestsweep.ExplainTombstone) adminapi.ExplainTombstone {
	return adminapi.ExplainTombstone{
		State:       in.State,
		Bucket:      in.Bucket,
		Key:         in.Key,
		Size:        in.Size,
		Frontier:    in.Frontier,
		RefRev:      in.RefRev,
		Term:        in.Term,
		Pass:        in.Pass,
		Attempts:    in.Attempts,
		Since:       in.Since,
		Reason:      in.Reason,
		ModRevision: in.ModRevision,
	}
}

func fromExplainPlane(in digestsweep.ExplainPlane) adminapi.ExplainPlane {
	return adminapi.ExplainPlane{
		Plane:    in.Plane,
		Revision: in.Revision,
		Applied:  in.Applied,
	}
}

func fromExplainGuard(in digestsweep.ExplainGuard) adminapi.ExplainGuard {
	out := adminapi.ExplainGuard{
		Bucket:       in.Bucket,
		Key:          in.Key,
		Term:         in.Term,
		Pass:         in.Pass,
		At:           in.At,
		ModRevision:  in.ModRevision,
		Undecodable:  in.Undecodable,
		SettledAfter: in.SettledAfter,
	}
	if a := in.Attempt; a != nil {
		out.Attempt = &adminapi.GuardAttempt{Sent: a.Sent, Deadline: a.Deadline, Term: a.Term, Pass: a.Pass}
	}
	return out
}
