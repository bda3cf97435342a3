package admin

import (
	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/sweep"
)

// Conversions from the reclaimer's upload explanations, checklists and
// pass summaries to the API's documents, field by field.

func fromStep(in sweep.Step) adminapi.Step {
	return adminapi.Step{
		Rule:    in.Rule,
		Matched: in.Matched,
		Detail:  in.Detail,
		Values:  in.Values,
	}
}

func fromPassSummary(in sweep.PassSummary) adminapi.PassSummary {
	return adminapi.PassSummary{
		Pass:           in.Pass,
		Term:           in.Term,
		Finished:       in.Finished,
		DryRun:         in.DryRun,
		Refused:        in.Refused,
		Stopped:        in.Stopped,
		DigestsRefused: in.DigestsRefused,
		DigestsKept:    in.DigestsKept,
		RebuildFailed:  in.RebuildFailed,
	}
}

func fromExplainPolicy(in reclaim.ExplainPolicy) adminapi.ExplainPolicy {
	return adminapi.ExplainPolicy{
		Grace:       in.Grace,
		DeleteAfter: in.DeleteAfter,
		StuckLimit:  in.StuckLimit,
		ClockSkew:   in.ClockSkew,
	}
}

func fromUploadExplanation(in reclaim.UploadExplanation) adminapi.UploadExplanation {
	return adminapi.UploadExplanation{
		Bucket:   in.Bucket,
		Key:      in.Key,
		UploadID: in.UploadID,
		Now:      in.Now,
		Revision: in.Revision,
		Verdict:  in.Verdict,
		Reason:   in.Reason,
		Stuck:    in.Stuck,
		DryRun:   in.DryRun,
		Policy:   fromExplainPolicy(in.Policy),
		Backend:  fromExplainUpload(in.Backend),
		Session:  convertPtr(in.Session, fromExplainSession),
		Steps:    convertSlice(in.Steps, fromStep),
		History:  convertSlice(in.History, fromExplainTransition),
		Orphan:   convertPtr(in.Orphan, fromExplainOrphan),
		LastPass: convertPtr(in.LastPass, fromPassSummary),
		Notes:    in.Notes,
	}
}

func fromExplainUpload(in reclaim.ExplainUpload) adminapi.ExplainUpload {
	return adminapi.ExplainUpload{
		Present:          in.Present,
		Parts:            in.Parts,
		Bytes:            in.Bytes,
		Initiated:        in.Initiated,
		NewestPart:       in.NewestPart,
		NewestUnrecorded: in.NewestUnrecorded,
	}
}

func fromExplainSession(in reclaim.ExplainSession) adminapi.ExplainSession {
	return adminapi.ExplainSession{
		State:         in.State,
		StateSince:    in.StateSince,
		Owner:         in.Owner,
		Created:       in.Created,
		LastActivity:  in.LastActivity,
		ExpiredAt:     in.ExpiredAt,
		Uncertain:     in.Uncertain,
		AbortAttempts: in.AbortAttempts,
		ModRevision:   in.ModRevision,
		Activity:      convertPtr(in.Activity, fromExplainActivity),
		PartsInFlight: in.PartsInFlight,
	}
}

func fromExplainActivity(in reclaim.ExplainActivity) adminapi.ExplainActivity {
	return adminapi.ExplainActivity{
		At:          in.At,
		What:        in.What,
		PartNumber:  in.PartNumber,
		ModRevision: in.ModRevision,
	}
}

func fromExplainTransition(in reclaim.ExplainTransition) adminapi.ExplainTransition {
	return adminapi.ExplainTransition{
		At:     in.At,
		From:   in.From,
		To:     in.To,
		Actor:  in.Actor,
		Term:   in.Term,
		Reason: in.Reason,
	}
}

func fromExplainOrphan(in reclaim.ExplainOrphan) adminapi.ExplainOrphan {
	return adminapi.ExplainOrphan{
		Action:    in.Action,
		Principal: in.Principal,
		Term:      in.Term,
		At:        in.At,
		Parts:     in.Parts,
		Bytes:     in.Bytes,
		Outcome:   in.Outcome,
	}
}
