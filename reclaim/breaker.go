package reclaim

import "github.com/sweepgate/sweepgate/sweep"

// Defaults of the breaker's limits.
const (
	// DefaultMaxDelete is the most parts one pass deletes.
	DefaultMaxDelete = int64(10000)
	// DefaultMaxDeleteFraction is the largest share of all stored parts one
	// pass deletes: a plan to delete more says more about the picture the
	// pass had (a wrong clock, a lost etcd) than about abandoned uploads.
	DefaultMaxDeleteFraction = 0.25
	// DefaultMaxDeleteUploads and DefaultMaxDeleteUploadsFraction are the
	// same ceilings in uploads, so that uploads with few or no parts
	// cannot all go at once.
	DefaultMaxDeleteUploads         = int64(1000)
	DefaultMaxDeleteUploadsFraction = 0.25
	// DefaultMaxMark and DefaultMaxMarkFraction bound the uploads one pass
	// marks expired: a mark is undone by the next part, but a plan to mark
	// most uploads at once says the picture is wrong.
	DefaultMaxMark         = int64(10000)
	DefaultMaxMarkFraction = 0.5
)

// breaker checks a whole plan against the ceilings before anything is done
// and returns why it is refused, or "" when it is not. b receives the
// numbers it compared, for the report.
func (r *Reclaimer) breaker(u Uploads, b *Breaker) string {
	stored := u.Stored()
	c := r.cfg
	*b = Breaker{
		DeleteParts: u.Delete.Parts, StoredParts: stored.Parts, MaxDelete: c.MaxDelete, MaxDeleteFraction: c.MaxDeleteFraction,
		DeleteUploads: u.Delete.Sessions, StoredUploads: stored.Sessions,
		MaxDeleteUploads: c.MaxDeleteUploads, MaxDeleteUploadsFraction: c.MaxDeleteUploadsFraction,
		MarkUploads: u.Mark.Sessions, MaxMark: c.MaxMark, MaxMarkFraction: c.MaxMarkFraction,
	}
	return sweep.OverAny(
		sweep.Ceiling{Verb: "deletes", Unit: "parts", Setting: "max_delete", Count: b.DeleteParts, Stored: b.StoredParts, Max: b.MaxDelete, Fraction: b.MaxDeleteFraction},
		sweep.Ceiling{Verb: "deletes", Unit: "uploads", Setting: "max_delete_uploads", Count: b.DeleteUploads, Stored: b.StoredUploads, Max: b.MaxDeleteUploads, Fraction: b.MaxDeleteUploadsFraction},
		sweep.Ceiling{Verb: "marks", Unit: "uploads", Setting: "max_mark", Count: b.MarkUploads, Stored: b.StoredUploads, Max: b.MaxMark, Fraction: b.MaxMarkFraction},
	)
}
