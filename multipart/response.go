package multipart

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// fail answers err as an S3 error. Errors that are not S3 errors are etcd
// failures: one that says etcd is unreachable or slow becomes SlowDown with
// Retry-After (s3err.ErrStateUnavailable), any other ServiceUnavailable.
// Either way the client may retry: nothing was done that a retry would
// repeat wrongly.
func (s *Service) fail(c *Call, err error) reply.Reply {
	var (
		s3e   *s3err.Error
		newer *etcdstore.NewerRecordError
	)
	switch {
	case errors.As(err, &s3e):
	case etcdstore.Unavailable(err):
		s.log.Warn("multipart call refused: etcd unavailable", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		err = s3err.ErrStateUnavailable
	case errors.As(err, &newer):
		s.log.Error("multipart call refused: a newer release's record", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		err = s3err.StateTooNew(newer.Kind, newer.Version, newer.Known, newer.Field)
	default:
		s.log.Error("multipart call failed", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		err = s3err.ErrServiceUnavailable.WithMessage("The gateway could not record the upload's state; please retry.")
	}
	return reply.Error(err)
}

// send forwards the call to the backend: with body, or with the client's
// verified payload when body is nil. When no answer came, the error is the
// one the client should get: the body's own verification error if that is
// what stopped the request, ServiceUnavailable otherwise.
func (s *Service) send(c *Call, body []byte) (*http.Response, error) {
	out, err := c.backendRequest(body)
	if err != nil {
		return nil, err
	}
	resp, err := s.backend.RoundTrip(out)
	if err != nil {
		if perr := c.PayloadErr(); perr != nil {
			return nil, perr
		}
		s.log.Warn("backend call failed", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		return nil, s3err.ErrBadGateway
	}
	return resp, nil
}

// sendForXML forwards the call and reads a 200 answer whole, decoding its XML
// into v. When there is nothing to decode (no answer, another status, an
// unreadable document) it returns ok false and the client's answer: other
// statuses are relayed unchanged.
func (s *Service) sendForXML(c *Call, v any) (resp *http.Response, body []byte, answer reply.Reply, ok bool) {
	resp, err := s.send(c, nil)
	if err != nil {
		return nil, nil, s.fail(c, err), false
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, reply.Relay(resp), false
	}
	body, err = readBody(resp)
	resp.Body.Close()
	if err == nil {
		err = xml.Unmarshal(body, v)
	}
	if err != nil {
		s.log.Error("unreadable backend answer", "id", c.RequestID, "op", c.Op, "err", err)
		return nil, nil, s.fail(c, s3err.ErrBadGateway), false
	}
	return resp, body, reply.Reply{}, true
}

// backendRequest is the request that forwards the call: with the client's
// verified payload when body is nil, otherwise with body.
func (c *Call) backendRequest(body []byte) (*http.Request, error) {
	if body == nil {
		return c.Forward.Request()
	}
	return c.Forward.WithBody(body), nil
}

// readBody reads the call's whole verified body; more than limit bytes is
// refused (MaxMessageLengthExceeded).
func (c *Call) readBody(limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Body(), limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, s3err.ErrMaxMessageLengthExceeded
	}
	return b, nil
}

// readBody reads a backend response body whole, within s3client.MaxAnswer.
func readBody(resp *http.Response) ([]byte, error) {
	b, err := s3client.ReadBody(resp.Body, s3client.MaxAnswer)
	if err != nil {
		return nil, fmt.Errorf("read backend response: %w", err)
	}
	return b, nil
}

// ErrorCode returns the S3 error code in body, or "" when body is not an
// error document (s3client.ErrorDocument). S3 can answer 200 with an error
// document for calls that take long (CompleteMultipartUpload,
// UploadPartCopy).
func ErrorCode(body []byte) string {
	code, _, _ := s3client.ErrorDocument(body)
	return code
}
