package multipart

import (
	"bytes"
	"encoding/xml"
	"testing"

	"github.com/sweepgate/sweepgate/etcdstore"
)

func TestListedFor(t *testing.T) {
	enforced := &Service{owners: true, admins: []string{"ops"}}
	shared := &Service{owners: false}
	for _, tc := range []struct {
		name      string
		s         *Service
		principal string
		state     etcdstore.SessionState
		want      bool
	}{
		{"owner", enforced, "alice", etcdstore.StateActive, true},
		{"owner, expired", enforced, "alice", etcdstore.StateExpired, true},
		{"owner, completing", enforced, "alice", etcdstore.StateCompleting, true},
		{"other principal", enforced, "bob", etcdstore.StateActive, false},
		{"other principal, expired", enforced, "bob", etcdstore.StateExpired, false},
		{"admin principal", enforced, "ops", etcdstore.StateActive, true},
		{"owner, aborting", enforced, "alice", etcdstore.StateAborting, false},
		{"admin, aborted", enforced, "ops", etcdstore.StateAborted, false},
		{"ownership off", shared, "bob", etcdstore.StateActive, true},
		{"ownership off, cleanup pending", shared, "bob", etcdstore.StateCleanupPending, false},
	} {
		sess := &etcdstore.Session{Owner: "alice", State: tc.state}
		if got := tc.s.listedFor(tc.principal, sess); got != tc.want {
			t.Errorf("%s: listedFor(%s) = %v, want %v", tc.name, tc.principal, got, tc.want)
		}
	}
}

// TestListUploadsResultKeepsControlCharacters: a listing whose prefix,
// delimiter and markers hold control characters (the gateway passes them
// on) says the same after listUploads decodes the backend's answer and
// writes it again without the hidden uploads. The backend's answer is
// written as MinIO writes it, with encoding/xml.
func TestListUploadsResultKeepsControlCharacters(t *testing.T) {
	in := listUploadsResult{
		Bucket: "b", KeyMarker: "\n", UploadIDMarker: "\r\t", NextKeyMarker: "a\nb", NextUploadIDMarker: "\x01",
		Delimiter: "\n", Prefix: "p\x7f\x00", MaxUploads: 2, IsTruncated: true,
		Uploads: []listedUpload{{Key: "a\nb", UploadID: "u", Initiated: "2026-01-01T00:00:00.000Z"}},
	}
	in.CommonPrefixes = append(in.CommonPrefixes, struct {
		Prefix string `xml:"Prefix"`
	}{"x\n"})
	backend, err := xml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var got listUploadsResult
	if err := xml.Unmarshal(backend, &got); err != nil {
		t.Fatalf("the backend's answer does not decode: %v\n%s", err, backend)
	}
	again, err := xml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, backend) {
		t.Errorf("written again:\n%s\nwant the backend's:\n%s", again, backend)
	}
	if got.Delimiter != "\n" || got.KeyMarker != "\n" || got.UploadIDMarker != "\r\t" || got.CommonPrefixes[0].Prefix != "x\n" {
		t.Errorf("decoded %+v: the line breaks and tabs are not kept", got)
	}
}
