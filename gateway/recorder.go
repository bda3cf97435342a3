package gateway

import (
	"io"
	"net/http"

	"github.com/sweepgate/sweepgate/s3err"
)

// responseRecorder remembers the status and size of a response for the
// request's log line and metrics. Unwrap lets http.ResponseController reach
// the underlying writer's Flush.
type responseRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	// bodyUnread reports whether the client's request body is still (partly)
	// unread. An error answered then closes the connection: the unread
	// bytes would otherwise be taken for the next request.
	bodyUnread func() bool
	// replace, when it returns an error as the answer starts, makes the
	// answer that error instead (as an S3 error document for resource
	// and id): the client was cut off, and whatever the request's
	// handler answered is not what happened. Later writes are dropped.
	replace      func() error
	resource, id string
	replaced     bool
}

func (w *responseRecorder) WriteHeader(code int) {
	if code == http.StatusContinue {
		// net/http answers the client's Expect: 100-continue itself when
		// the body is first read (which happens once the backend has said
		// 100 Continue); forwarding the backend's own 100 as well would
		// send the client a second one.
		return
	}
	if w.replaced {
		return
	}
	if w.status == 0 && code >= 200 && w.replace != nil {
		if err := w.replace(); err != nil {
			w.replaced = true
			clear(w.Header())
			w.Header().Set("Connection", "close")
			rw := &countingWriter{ResponseWriter: w.ResponseWriter}
			s3err.Write(rw, err, w.resource, w.id)
			w.status, w.bytes = s3err.As(err).HTTPStatus, rw.n
			return
		}
	}
	if w.status == 0 && code >= 200 {
		w.status = code
		lowerMetadataNames(w.Header())
		if code >= 300 && w.bodyUnread() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// ReadFrom copies src to the response through the underlying writer's own
// ReadFrom when it has one (net/http's, which hands a plain TCP
// connection's bytes to the kernel: see passThrough.copyResponse),
// counting the bytes and dropping them after a replaced answer as Write
// does.
func (w *responseRecorder) ReadFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		// As Write: the answer was replaced, so the body is dropped.
		return io.Copy(io.Discard, src)
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{w.ResponseWriter}, src)
	}
	w.bytes += n
	return n, err
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

func (w *responseRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}
