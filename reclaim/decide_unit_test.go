package reclaim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// The upload sweep's decisions that need neither etcd nor a backend: the
// breaker, what keeps an upload at its action (a part streaming, a part
// written around the gateway) and how an unclear abort is recorded. They
// run with go test ./reclaim/ and start nothing.

// TestUploadBreaker: a plan is refused above any of its ceilings (parts
// deleted, uploads deleted, uploads marked; each in count and in share of
// what is stored) and allowed at them; the numbers it compared are
// recorded for the report.
func TestUploadBreaker(t *testing.T) {
	t.Parallel()
	r := &Reclaimer{cfg: Config{MaxDelete: 100, MaxDeleteFraction: 0.25, MaxDeleteUploads: 10, MaxDeleteUploadsFraction: 0.25,
		MaxMark: 20, MaxMarkFraction: 0.5}}
	n := func(sessions, parts int64) Count { return Count{Sessions: sessions, Parts: parts} }
	for _, tt := range []struct {
		name  string
		u     Uploads
		names string // "" when allowed
	}{
		{"within", Uploads{Keep: n(100, 1000), Delete: n(5, 50), Mark: n(10, 0)}, ""},
		{"at every ceiling", Uploads{Keep: n(1000, 1000), Delete: n(10, 100), Mark: n(20, 0)}, ""},
		{"parts above max_delete", Uploads{Keep: n(100, 1000), Delete: n(5, 101)}, "max_delete is"},
		{"parts above max_delete_fraction", Uploads{Keep: n(100, 100), Delete: n(5, 40)}, "max_delete_fraction"},
		{"uploads above max_delete_uploads", Uploads{Keep: n(100, 1000), Delete: n(11, 11)}, "max_delete_uploads is"},
		{"uploads without parts above their share", Uploads{Keep: n(10, 1000), Delete: n(10, 0)}, "max_delete_uploads_fraction"},
		{"held orphans count as stored", Uploads{Hold: n(100, 1000), Delete: n(5, 50)}, ""},
		{"marks above max_mark", Uploads{Keep: n(100, 0), Mark: n(21, 0)}, "max_mark is"},
		{"marks above max_mark_fraction", Uploads{Keep: n(4, 0), Mark: n(6, 0)}, "max_mark_fraction"},
		{"everything at once", Uploads{Delete: n(3, 3)}, "max_delete_fraction"},
	} {
		var b Breaker
		why := r.breaker(tt.u, &b)
		if (why != "") != (tt.names != "") || !strings.Contains(why, tt.names) {
			t.Errorf("%s: breaker = %q, want refused %v naming %q", tt.name, why, tt.names != "", tt.names)
		}
		stored := tt.u.Stored()
		if b.DeleteParts != tt.u.Delete.Parts || b.DeleteUploads != tt.u.Delete.Sessions || b.MarkUploads != tt.u.Mark.Sessions ||
			b.StoredParts != stored.Parts || b.StoredUploads != stored.Sessions || b.MaxDelete != r.cfg.MaxDelete {
			t.Errorf("%s: breaker compared %+v, not the plan's numbers", tt.name, b)
		}
	}
}

// TestStreamingKeeps: an upload with a part in flight through the gateway
// is kept instead of marked or deleted; no other verdict changes.
func TestStreamingKeeps(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []Verdict{Mark, Delete, Keep, Hold} {
		d := Decision{Verdict: v, Reason: "plan"}
		if got := streaming(d, 0, time.Time{}); got != d {
			t.Errorf("%s with nothing in flight = %+v, want it unchanged", v, got)
		}
		got := streaming(d, 2, since)
		want := v
		if v == Mark || v == Delete {
			want = Keep
		}
		if got.Verdict != want || (want != v) != strings.Contains(got.Reason, "streaming") {
			t.Errorf("%s with 2 parts in flight = %s (%q), want %s", v, got.Verdict, got.Reason, want)
		}
	}
}

// TestBackendForbids: a part on the backend that the gateway did not
// record keeps the upload: at a mark when it is newer than the recorded
// activity and within the grace; at a delete when it is not older than
// the mark less the clock skew allowance, or when no mark time is known.
func TestBackendForbids(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{Grace: time.Hour, ClockSkew: 5 * time.Minute}
	recorded := now.Add(-3 * time.Hour)
	mark := now.Add(-2 * time.Hour)
	for _, tt := range []struct {
		name      string
		v         Verdict
		newest    time.Time
		expiredAt *time.Time
		want      bool
	}{
		{"mark, no unrecorded part", Mark, time.Time{}, nil, false},
		{"mark, part older than the recorded activity", Mark, recorded.Add(-time.Minute), nil, false},
		{"mark, newer part within the grace", Mark, now.Add(-30 * time.Minute), nil, true},
		{"mark, newer part at the grace", Mark, now.Add(-time.Hour), nil, true},
		{"mark, newer part past the grace", Mark, now.Add(-time.Hour - time.Second), nil, false},
		{"delete, no unrecorded part", Delete, time.Time{}, &mark, false},
		{"delete, part well before the mark", Delete, mark.Add(-10 * time.Minute), &mark, false},
		{"delete, part at the mark less the skew", Delete, mark.Add(-5 * time.Minute), &mark, false},
		{"delete, part within the skew before the mark", Delete, mark.Add(-4 * time.Minute), &mark, true},
		{"delete, part after the mark", Delete, mark.Add(time.Minute), &mark, true},
		{"delete, no mark time", Delete, recorded.Add(-time.Hour), nil, true},
		{"keep", Keep, now, &mark, false},
	} {
		if got := backendForbids(tt.v, tt.newest, recorded, tt.expiredAt, now, p); got != tt.want {
			t.Errorf("%s: backendForbids = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestUnrecordedNewest: a backend part counts as written around the
// gateway unless a part record of the gateway names its number and ETag
// and was written no earlier than the skew allowance before the part's
// time; the newest such part is returned.
func TestUnrecordedNewest(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	skew := 5 * time.Minute
	recorded := []etcdstore.Part{{Number: 1, ETag: "aa", At: at}, {Number: 2, ETag: "bb", At: at}}
	part := func(n int, etag string, t time.Time) s3client.Part {
		return s3client.Part{Number: n, ETag: etag, LastModified: t}
	}
	for _, tt := range []struct {
		name  string
		parts []s3client.Part
		want  time.Time
	}{
		{"none", nil, time.Time{}},
		{"recorded, quoted ETag", []s3client.Part{part(1, `"aa"`, at), part(2, "bb", at.Add(skew))}, time.Time{}},
		{"recorded part re-sent later than the skew", []s3client.Part{part(1, "aa", at.Add(skew+time.Nanosecond))}, at.Add(skew + time.Nanosecond)},
		{"other bytes under a recorded number", []s3client.Part{part(2, "cc", at.Add(-time.Hour))}, at.Add(-time.Hour)},
		{"number never recorded", []s3client.Part{part(1, "aa", at), part(3, "dd", at.Add(-2*time.Hour))}, at.Add(-2 * time.Hour)},
		{"newest of several", []s3client.Part{part(3, "dd", at.Add(-2*time.Hour)), part(4, "ee", at.Add(-time.Hour)), part(1, "aa", at)}, at.Add(-time.Hour)},
	} {
		if got := unrecordedNewest(tt.parts, recorded, skew); !got.Equal(tt.want) {
			t.Errorf("%s: unrecordedNewest = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestUnclearAbort: an abort whose answer was lost is recorded aborted
// only when listing the upload again shows it gone; still there, or not
// listed, it is left cleanup_pending for the reconciler. The doubt is
// recorded in every case.
func TestUnclearAbort(t *testing.T) {
	t.Parallel()
	aerr := errors.New("connection reset")
	for _, tt := range []struct {
		name    string
		present bool
		lerr    error
		want    etcdstore.SessionState
	}{
		{"gone on listing again", false, nil, etcdstore.StateAborted},
		{"still there", true, nil, etcdstore.StateCleanupPending},
		{"listing failed", false, errors.New("503"), etcdstore.StateCleanupPending},
		{"listing failed, said present", true, errors.New("503"), etcdstore.StateCleanupPending},
	} {
		to, doubt, reason := unclearAbort(aerr, tt.present, tt.lerr)
		if to != tt.want || !strings.Contains(doubt, "connection reset") || reason == "" {
			t.Errorf("%s: unclearAbort = %s, %q, %q; want %s with the doubt", tt.name, to, doubt, reason, tt.want)
		}
	}
}

// TestClassifyDeletesOnlyStandingMarks runs Classify over a grid of
// sessions and checks, whatever the combination, what a user relies on:
// an upload is deleted only when it was marked expired, the mark stood
// longer than DeleteAfter on the wall clock and on the elapsed clock, and
// nothing happened to the session since the mark; it is marked only when
// active and idle past the grace; a completing upload is always kept; an
// upload without a session is held, never deleted. Age alone never
// deletes.
func TestClassifyDeletesOnlyStandingMarks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{Grace: 24 * time.Hour, DeleteAfter: 12 * time.Hour, StuckLimit: time.Hour, ClockSkew: 5 * time.Minute, Elapsed: 2000 * time.Hour}
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	if d := Classify(p, now, nil, nil); d.Verdict != Hold {
		t.Errorf("no session: %s, want hold", d.Verdict)
	}
	states := []etcdstore.SessionState{etcdstore.StateActive, etcdstore.StateExpired, etcdstore.StateCompleting,
		etcdstore.StateAborting, etcdstore.StateAborted, etcdstore.StateCleanupPending, etcdstore.StateCompleted}
	durations := []time.Duration{-time.Hour, time.Minute, 11 * time.Hour, 13 * time.Hour, 30 * time.Hour, 1000 * time.Hour}
	n, deletes := 0, 0
	for _, st := range states {
		for _, created := range durations[1:] {
			for _, lastAgo := range durations {
				for _, markAgo := range append([]time.Duration{0}, durations...) { // 0: no mark time
					for _, elapsedAgo := range []time.Duration{-time.Hour, time.Hour, 13 * time.Hour} {
						for _, touched := range []bool{false, true} {
							sess := &etcdstore.Session{Bucket: "b", Key: "k", UploadID: "u", Created: ago(created), LastActivity: ago(lastAgo)}
							sess.Transition(etcdstore.StateActive, ago(created), "gateway", "created")
							if st != etcdstore.StateActive {
								sess.Transition(st, ago(max(markAgo, time.Minute)), "test", "")
							}
							if markAgo != 0 {
								m, e := ago(markAgo), p.Elapsed-elapsedAgo
								sess.ExpiredAt, sess.ExpiredElapsed = &m, &e
							}
							if touched {
								sess.Transition(st, ago(time.Minute), "test", "touched after the mark")
								sess.History[len(sess.History)-1].To = etcdstore.StateActive
							}
							n++
							d := Classify(p, now, sess, nil)
							where := fmt.Sprintf("%s, created %s ago, active %s ago, marked %s ago (elapsed %s), touched %v: %s (%q)",
								st, created, lastAgo, markAgo, elapsedAgo, touched, d.Verdict, d.Reason)
							checkDecision(t, where, p, now, sess, d)
							if d.Verdict == Delete {
								deletes++
							}
						}
					}
				}
			}
		}
	}
	if deletes == 0 || n < 1000 {
		t.Fatalf("%d sessions classified, %d deleted: the grid does not reach Delete", n, deletes)
	}
}

// checkDecision fails t when decision d about sess breaks a rule of
// Classify.
func checkDecision(t *testing.T, where string, p Policy, now time.Time, sess *etcdstore.Session, d Decision) {
	t.Helper()
	last := lastActivity(sess, nil)
	switch d.Verdict {
	case Hold:
		t.Errorf("a session's upload is held: %s", where)
	case Mark:
		if sess.State != etcdstore.StateActive || now.Sub(last) <= p.Grace {
			t.Errorf("marked, but not active and idle past the grace: %s", where)
		}
	case Delete:
		switch {
		case sess.State != etcdstore.StateExpired || sess.ExpiredAt == nil:
			t.Errorf("deleted without a recorded mark: %s", where)
		case now.Sub(*sess.ExpiredAt) <= p.DeleteAfter:
			t.Errorf("deleted before the mark stood delete_after on the wall clock: %s", where)
		case p.Elapsed-*sess.ExpiredElapsed <= p.DeleteAfter:
			t.Errorf("deleted before the mark stood delete_after on the elapsed clock: %s", where)
		case last.After(*sess.ExpiredAt) || sess.History[len(sess.History)-1].To != etcdstore.StateExpired:
			t.Errorf("deleted although the session changed after its mark: %s", where)
		case d.FutureTime:
			t.Errorf("deleted with a time in the future: %s", where)
		}
	}
	if sess.State == etcdstore.StateCompleting && d.Verdict != Keep {
		t.Errorf("a completing upload is not kept: %s", where)
	}
}
