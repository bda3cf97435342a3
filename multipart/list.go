package multipart

import (
	"context"
	"encoding/xml"
	"errors"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
)

// listParts serves ListParts, which counts as activity on the upload.
func (s *Service) listParts(ctx context.Context, c *Call) reply.Reply {
	// An upload without a session (found false) passes through unrecorded.
	if _, _, err := s.recordActivity(ctx, c, 0, ""); err != nil {
		return s.fail(c, err)
	}
	return s.passThrough(c, nil)
}

// listUploadsResult is S3's ListMultipartUploads answer, every element kept
// so the filtered answer says all the backend said.
type listUploadsResult struct {
	XMLName            xml.Name       `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
	Bucket             string         `xml:"Bucket"`
	KeyMarker          string         `xml:"KeyMarker"`
	UploadIDMarker     string         `xml:"UploadIdMarker"`
	NextKeyMarker      string         `xml:"NextKeyMarker"`
	NextUploadIDMarker string         `xml:"NextUploadIdMarker"`
	Delimiter          string         `xml:"Delimiter,omitempty"`
	Prefix             string         `xml:"Prefix"`
	EncodingType       string         `xml:"EncodingType,omitempty"`
	MaxUploads         int            `xml:"MaxUploads"`
	IsTruncated        bool           `xml:"IsTruncated"`
	Uploads            []listedUpload `xml:"Upload"`
	CommonPrefixes     []struct {
		Prefix string `xml:"Prefix"`
	} `xml:"CommonPrefixes"`
}

type listedUpload struct {
	Key               string `xml:"Key"`
	UploadID          string `xml:"UploadId"`
	Initiator         *owner `xml:"Initiator,omitempty"`
	Owner             *owner `xml:"Owner,omitempty"`
	StorageClass      string `xml:"StorageClass,omitempty"`
	Initiated         string `xml:"Initiated"`
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

// hiddenFromListing reports whether an upload in state st is left out of
// ListMultipartUploads: its abort is decided, so for clients it is gone even
// while the backend still holds it.
func hiddenFromListing(st etcdstore.SessionState) bool {
	switch st {
	case etcdstore.StateAborting, etcdstore.StateAborted, etcdstore.StateCleanupPending:
		return true
	}
	return false
}

// listedFor reports whether principal's ListMultipartUploads shows the
// upload of sess: not when its abort is decided, and, with ownership
// enforced, only to its owner and the admin principals, who alone may act
// on it (another principal would learn its key and upload id for nothing).
func (s *Service) listedFor(principal string, sess *etcdstore.Session) bool {
	return !hiddenFromListing(sess.State) && s.mayAct(principal, sess)
}

// listUploads serves ListMultipartUploads from the backend's listing, less
// the uploads whose sessions say they are aborted or being aborted, and
// those of other principals (listedFor). Uploads without a session are
// listed: they are nobody's.
func (s *Service) listUploads(ctx context.Context, c *Call) reply.Reply {
	var res listUploadsResult
	resp, body, answer, ok := s.sendForXML(c, &res)
	if !ok {
		return answer
	}
	hidden := 0
	kept := res.Uploads[:0]
	for _, u := range res.Uploads {
		v, err := s.store.GetSession(ctx, c.Bucket, u.UploadID)
		if err == nil && !s.listedFor(c.Principal, &v.Value) {
			hidden++
			continue
		}
		if err != nil && !errors.Is(err, etcdstore.ErrNotFound) {
			return s.fail(c, err)
		}
		kept = append(kept, u)
	}
	if hidden == 0 {
		return reply.Buffered(resp, body)
	}
	res.Uploads = kept
	return reply.XML(nil, res)
}
