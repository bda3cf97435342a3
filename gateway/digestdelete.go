package gateway

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/audit"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/gateway/s3err"
)

// deleteRequest is the body of DeleteObjects.
type deleteRequest struct {
	XMLName xml.Name       `xml:"Delete"`
	Quiet   bool           `xml:"Quiet,omitempty"`
	Objects []deleteObject `xml:"Object"`
}

type deleteObject struct {
	Key              string `xml:"Key"`
	VersionID        string `xml:"VersionId,omitempty"`
	ETag             string `xml:"ETag,omitempty"`
	LastModifiedTime string `xml:"LastModifiedTime,omitempty"`
	Size             string `xml:"Size,omitempty"`
}

// deleteResult is the answer of DeleteObjects. XMLName has no tag so that a
// backend's answer parses whatever its namespace.
type deleteResult struct {
	XMLName xml.Name
	Deleted []deletedObject `xml:"Deleted"`
	Errors  []deleteError   `xml:"Error"`
}

type deletedObject struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

// trashedObject is a reference object whose references a DeleteObjects
// moved to the trash.
type trashedObject struct {
	obj deleteObject
	at  time.Time
}

// deleteObjects serves every DeleteObjects. Its document is parsed here
// and each key checked (checkKey); in a bucket of a content-addressed
// layout, each referenced blob is refused (unless an admin asks) and each
// reference object's references move to the trash. The rest goes to the
// backend in one request rebuilt from the parsed keys (the client's
// checksums are checked here), so that the keys the backend deletes are
// the keys judged, and the answers merge into one DeleteResult. A
// reference object the backend did not delete gets its references back.
func (g *Gateway) deleteObjects(w http.ResponseWriter, r *http.Request, req *request) {
	body, err := io.ReadAll(io.LimitReader(req.auth.Payload.Body(), maxDeleteBody+1))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if len(body) > maxDeleteBody {
		g.writeError(w, r, errBodyTooLarge)
		return
	}
	var in deleteRequest
	if err := xml.Unmarshal(body, &in); err != nil || len(in.Objects) == 0 || len(in.Objects) > maxDeleteObjects {
		g.writeError(w, r, s3err.ErrMalformedXML)
		return
	}
	// MinIO cleans a key that starts with "/" before it deletes: such a key
	// would be judged here as one name and deleted as another.
	for _, o := range in.Objects {
		if err := checkKey(o.Key); err != nil {
			g.writeError(w, r, err)
			return
		}
	}
	bucket := req.route.Bucket
	// The backend always gets the body rebuilt from what was parsed here,
	// never the client's own: the keys it deletes are the keys judged.
	if err := checkChecksums(r.Header, body); err != nil {
		g.writeError(w, r, err)
		return
	}
	ctx, cancel := stateContext(r)
	defer cancel()
	send := in.Objects
	var refused []deleteError
	var trashed []trashedObject
	if g.digests.serves(req.route) {
		send, refused, err = g.refuseReferenced(ctx, bucket, req.auth.Principal, send)
		if err != nil {
			g.refuseState(w, r, req, err)
			return
		}
		var inFlight []deleteError
		send, trashed, inFlight, err = g.trashSources(ctx, bucket, req.auth.Principal, send)
		if err != nil {
			g.refuseState(w, r, req, err)
			return
		}
		refused = append(refused, inFlight...)
	}
	res := deleteResult{Errors: refused}
	if len(send) > 0 {
		a, err := g.sendDeletes(r, req, deleteRequest{Quiet: in.Quiet, Objects: send})
		g.settleTrash(ctx, bucket, trashed, a, err)
		if err != nil {
			g.backendFailed(w, r, req, err)
			return
		}
		var got deleteResult
		if !a.success() || xml.Unmarshal(a.body, &got) != nil {
			g.writeAnswer(w, req, a) // the whole request failed
			return
		}
		res.Deleted = got.Deleted
		res.Errors = append(got.Errors, refused...)
	}
	g.writeDeleteResult(w, req, res)
}

// refuseReferenced splits objs into those that may be deleted and the
// blobs that are still referenced, which a principal who is not an admin
// may not delete. It changes nothing.
func (g *Gateway) refuseReferenced(ctx context.Context, bucket, principal string, objs []deleteObject) (send []deleteObject, refused []deleteError, err error) {
	admin := g.digests.isAdmin(principal)
	for _, o := range objs {
		if _, digest, blob := g.digests.layout.Namespace(bucket, o.Key); blob && !admin {
			referenced, err := g.digests.store.Referenced(ctx, digest, g.now())
			if err != nil {
				return nil, nil, err
			}
			if referenced {
				e := errReferenced(digest)
				refused = append(refused, deleteError{Key: o.Key, VersionID: o.VersionID, Code: e.Code, Message: e.Message})
				continue
			}
		}
		send = append(send, o)
	}
	return send, refused, nil
}

// trashSources moves the references of the reference objects among objs to
// the trash. An object with a write in flight is refused (SlowDown); a
// failure restores everything moved so far.
func (g *Gateway) trashSources(ctx context.Context, bucket, principal string, objs []deleteObject) (send []deleteObject, trashed []trashedObject, refused []deleteError, err error) {
	now := g.now()
	expires := now.Add(g.digests.trashWindow)
	for _, o := range objs {
		if g.digests.layout.Source(bucket, o.Key) == nil {
			send = append(send, o)
			continue
		}
		_, ok, err := g.digests.store.TrashRefSource(ctx, bucket, o.Key, principal, now, expires)
		switch {
		case errors.Is(err, etcdstore.ErrWriteInFlight):
			refused = append(refused, deleteError{Key: o.Key, VersionID: o.VersionID, Code: s3err.ErrSlowDown.Code, Message: "Another write or delete of this object is in flight; retry."})
			continue
		case err != nil:
			g.restoreTrash(ctx, bucket, o.Key, now)
			for _, t := range trashed {
				g.restoreTrash(ctx, bucket, t.obj.Key, t.at)
			}
			return nil, nil, nil, err
		case ok:
			trashed = append(trashed, trashedObject{obj: o, at: now})
			audit.Record(g.logFor(ctx), audit.TrashObject, bucket+"/"+o.Key, "DeleteObjects of a reference object: its digests stay retained in the trash until it expires",
				"principal", principal, "deleted_at", now, "expires", expires)
		}
		send = append(send, o)
	}
	return send, trashed, refused, nil
}

// sendDeletes sends the rebuilt DeleteObjects request.
func (g *Gateway) sendDeletes(r *http.Request, req *request, d deleteRequest) (*answer, error) {
	doc, err := xml.Marshal(d)
	if err != nil {
		return nil, err
	}
	body := append([]byte(xml.Header), doc...)
	out, err := g.backendRequest(r, req, body)
	if err != nil {
		return nil, err
	}
	for name := range out.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-checksum-") || strings.EqualFold(name, "x-amz-sdk-checksum-algorithm") {
			out.Header.Del(name)
		}
	}
	sum := md5.Sum(body)
	out.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	return g.send(out)
}

// settleTrash restores the references of the trashed reference objects
// that the backend did not delete.
func (g *Gateway) settleTrash(ctx context.Context, bucket string, trashed []trashedObject, a *answer, err error) {
	if len(trashed) == 0 {
		return
	}
	var got deleteResult
	if err == nil && a.success() && xml.Unmarshal(a.body, &got) != nil {
		err = errors.New("unreadable DeleteResult")
	}
	failed := map[deleteObject]bool{}
	for _, e := range got.Errors {
		failed[deleteObject{Key: e.Key, VersionID: e.VersionID}] = true
	}
	for _, t := range trashed {
		var back bool
		switch {
		case err == nil && a.definiteFailure():
			back = true
		case err == nil && a.success() && failed[deleteObject{Key: t.obj.Key, VersionID: t.obj.VersionID}]:
			back = true
		case err == nil && a.success() && t.obj.VersionID == "":
			back = false
		default:
			back = g.stillThere(ctx, bucket, t.obj.Key, t.obj.VersionID != "", a, err)
		}
		if back {
			g.restoreTrash(ctx, bucket, t.obj.Key, t.at)
		}
	}
}

// writeDeleteResult answers a DeleteObjects with res.
func (g *Gateway) writeDeleteResult(w http.ResponseWriter, req *request, res deleteResult) {
	res.XMLName = xml.Name{Space: s3Namespace, Local: "DeleteResult"}
	doc, err := xml.Marshal(res)
	if err != nil {
		s3err.Write(w, err, "/"+req.route.Bucket, req.id)
		return
	}
	body := append([]byte(xml.Header), doc...)
	g.writeAnswer(w, req, &answer{status: http.StatusOK, header: http.Header{"Content-Type": {"application/xml"}}, body: body})
}

// checksumHashes are the header checksums S3 accepts on a request body.
var checksumHashes = map[string]func() hash.Hash{
	"X-Amz-Checksum-Crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"X-Amz-Checksum-Crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"X-Amz-Checksum-Crc64nvme": func() hash.Hash { return crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5)) },
	"X-Amz-Checksum-Sha1":      sha1.New,
	"X-Amz-Checksum-Sha256":    sha256.New,
	"Content-Md5":              md5.New,
}

// checkChecksums checks body against the checksums in h (Content-MD5 and
// x-amz-checksum-*), which the backend cannot check once the body is
// rebuilt.
func checkChecksums(h http.Header, body []byte) error {
	for name, newHash := range checksumHashes {
		want := h.Get(name)
		if want == "" {
			continue
		}
		sum := newHash()
		sum.Write(body)
		if base64.StdEncoding.EncodeToString(sum.Sum(nil)) != want {
			return s3err.ErrBadDigest.WithMessage("The %s you specified did not match what we received.", name)
		}
	}
	return nil
}
