package multipart

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// hopHeaders are connection-level headers that are not copied from the
// backend's response.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
}

// copyHeader copies the backend response's end-to-end headers to w.
func copyHeader(w http.ResponseWriter, c *Call, from http.Header) {
	h := w.Header()
	for k, vs := range from {
		h[k] = append([]string(nil), vs...)
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	h.Set("X-Amz-Request-Id", c.RequestID)
}

// relay streams a backend response to the client unchanged, but for the
// request id in its error document (s3err.StampResponse).
func (s *Service) relay(w http.ResponseWriter, c *Call, resp *http.Response) {
	s3err.StampResponse(resp, c.RequestID)
	copyHeader(w, c, resp.Header)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// writeBuffered answers with a backend response whose body was read whole;
// an error document carries the gateway's request id.
func (s *Service) writeBuffered(w http.ResponseWriter, c *Call, resp *http.Response, body []byte) {
	body = s3err.StampRequestID(body, c.RequestID)
	copyHeader(w, c, resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// writeXML answers 200 with an XML document the service rendered itself.
func (s *Service) writeXML(w http.ResponseWriter, c *Call, header http.Header, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		s.writeError(w, c, err)
		return
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", c.RequestID)
	w.Header().Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(body)
}

// writeNoContent answers 204, the success of an abort.
func (s *Service) writeNoContent(w http.ResponseWriter, c *Call) {
	w.Header().Set("X-Amz-Request-Id", c.RequestID)
	w.WriteHeader(http.StatusNoContent)
}

// writeError answers with an S3 error document. Errors that are not S3
// errors are etcd failures: one that says etcd is unreachable or slow
// becomes SlowDown with Retry-After (s3err.ErrStateUnavailable), any other
// ServiceUnavailable. Either way the client may retry: nothing was done
// that a retry would repeat wrongly.
func (s *Service) writeError(w http.ResponseWriter, c *Call, err error) {
	var s3e *s3err.Error
	switch {
	case errors.As(err, &s3e):
	case etcdstore.Unavailable(err):
		s.log.Warn("multipart call refused: etcd unavailable", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		err = s3err.ErrStateUnavailable
	default:
		s.log.Error("multipart call failed", "id", c.RequestID, "op", c.Op, "upload_id", c.UploadID, "err", err)
		err = s3err.ErrServiceUnavailable.WithMessage("The gateway could not record the upload's state; please retry.")
	}
	s3err.Write(w, err, c.Resource, c.RequestID)
}

// send forwards the call to the backend: with body, or with the client's
// verified payload when body is nil. When no answer came, the error is the
// one the client should get: the body's own verification error if that is
// what stopped the request, ServiceUnavailable otherwise.
func (s *Service) send(c *Call, body []byte) (*http.Response, error) {
	out, err := c.BackendRequest(body)
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
// unreadable document) it answers the client itself and returns ok false;
// other statuses are relayed unchanged.
func (s *Service) sendForXML(w http.ResponseWriter, c *Call, v any) (resp *http.Response, body []byte, ok bool) {
	resp, err := s.send(c, nil)
	if err != nil {
		s.writeError(w, c, err)
		return nil, nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.relay(w, c, resp)
		return nil, nil, false
	}
	if body, err = readBody(resp); err == nil {
		err = xml.Unmarshal(body, v)
	}
	if err != nil {
		s.log.Error("unreadable backend answer", "id", c.RequestID, "op", c.Op, "err", err)
		s.writeError(w, c, s3err.ErrBadGateway)
		return nil, nil, false
	}
	return resp, body, true
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
