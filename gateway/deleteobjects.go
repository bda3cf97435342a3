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

	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

const (
	// maxDeleteBody and maxDeleteObjects bound a DeleteObjects request as S3
	// does: 1000 keys of up to 1 KiB each fit.
	maxDeleteBody    = 2 << 20
	maxDeleteObjects = 1000
	// s3Namespace is the XML namespace of S3's documents.
	s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"
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

// deleteObjects serves every DeleteObjects. Its document is parsed here
// and each key checked (checkKey). In a bucket of a content-addressed
// layout the digest service does its part (digests.Service.DeleteObjects:
// referenced blobs refused, reference objects' references trashed, and
// brought back for those the backend did not delete). The rest goes to
// the backend in one request rebuilt from the parsed keys (the client's
// checksums are checked here), so that the keys the backend deletes are
// the keys judged, and the answers merge into one DeleteResult.
func (g *Gateway) deleteObjects(w http.ResponseWriter, r *http.Request, req *request) {
	body, err := io.ReadAll(io.LimitReader(req.auth.Payload.Body(), maxDeleteBody+1))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if len(body) > maxDeleteBody {
		g.writeError(w, r, s3err.ErrMaxMessageLengthExceeded)
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
		if err := g.checkReserved(o.Key); err != nil {
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
	var a *s3client.Answer
	var sendErr error
	sent := false
	sendBatch := func(ctx context.Context, objs []deleteObject) (*s3client.Answer, error) {
		a, sendErr = g.sendDeletes(ctx, r, req, deleteRequest{Quiet: in.Quiet, Objects: objs})
		sent = true
		return a, sendErr
	}
	var refused []deleteError
	if req.shard.Digests.Serves(s3op.DeleteObjects, bucket, "") {
		if g.refuseUnassigned(w, r, req) {
			return
		}
		var ok bool
		if refused, ok = g.deleteDigests(w, r, req, in.Objects, sendBatch); !ok {
			return
		}
	} else {
		_, _ = sendBatch(r.Context(), in.Objects)
	}
	res := deleteResult{Errors: refused}
	if sent {
		if sendErr != nil {
			g.backendFailed(w, r, req, sendErr)
			return
		}
		if !a.Success() {
			g.writeAnswer(w, req, a) // the whole request failed
			return
		}
		var got deleteResult
		if xml.Unmarshal(a.Body, &got) != nil || got.XMLName.Local != "DeleteResult" {
			// Nothing says which keys went: the client learns that the
			// outcome is unknown, not that they were deleted.
			g.backendFailed(w, r, req, errors.New("backend answered DeleteObjects with a success whose body is not a DeleteResult"))
			return
		}
		res.Deleted = got.Deleted
		res.Errors = append(got.Errors, refused...)
	}
	g.writeDeleteResult(w, req, res)
}

// sendDeletes sends the rebuilt DeleteObjects request within ctx.
func (g *Gateway) sendDeletes(ctx context.Context, r *http.Request, req *request, d deleteRequest) (*s3client.Answer, error) {
	doc, err := xml.Marshal(d)
	if err != nil {
		return nil, err
	}
	body := append([]byte(xml.Header), doc...)
	out := g.forwardOf(r, req).WithBody(body)
	for name := range out.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-checksum-") || strings.EqualFold(name, "x-amz-sdk-checksum-algorithm") {
			out.Header.Del(name)
		}
	}
	sum := md5.Sum(body)
	out.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	return g.send(out.WithContext(ctx))
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
	g.writeAnswer(w, req, &s3client.Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/xml"}}, Body: body})
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
