package otlp

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// encoding is the wire format of a request, and of its answer.
type encoding int

const (
	encProtobuf encoding = iota
	encJSON
)

// Content types of OTLP/HTTP.
const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
)

func (e encoding) contentType() string {
	if e == encJSON {
		return contentTypeJSON
	}
	return contentTypeProtobuf
}

// encodingOf reads a Content-Type header (parameters such as charset are ignored).
func encodingOf(contentType string) (encoding, error) {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("Content-Type %q: want %s or %s", contentType, contentTypeProtobuf, contentTypeJSON)
	}
	switch mediaType {
	case contentTypeProtobuf:
		return encProtobuf, nil
	case contentTypeJSON:
		return encJSON, nil
	}
	return 0, fmt.Errorf("Content-Type %q is not supported: want %s or %s", mediaType, contentTypeProtobuf, contentTypeJSON)
}

// decode reads the body (at most MaxBodyBytes, compressed and decompressed) and unmarshals
// the request.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, enc encoding) (pmetric.Metrics, *httpError) {
	body, herr := readBody(w, r, h.opts.MaxBodyBytes)
	if herr != nil {
		return pmetric.Metrics{}, herr
	}
	md, err := unmarshal(body, enc)
	if err != nil {
		return pmetric.Metrics{}, errorf(http.StatusBadRequest, "%v", err)
	}
	return md, nil
}

// unmarshal decodes an ExportMetricsServiceRequest.
func unmarshal(body []byte, enc encoding) (pmetric.Metrics, error) {
	req := pmetricotlp.NewExportRequest()
	if enc == encJSON {
		if err := req.UnmarshalJSON(body); err != nil {
			return pmetric.Metrics{}, fmt.Errorf("decoding JSON ExportMetricsServiceRequest: %w", err)
		}
		return req.Metrics(), nil
	}
	if err := req.UnmarshalProto(body); err != nil {
		return pmetric.Metrics{}, fmt.Errorf("decoding protobuf ExportMetricsServiceRequest: %w", err)
	}
	return req.Metrics(), nil
}

// readBody reads a plain or gzip body of at most limit bytes either way.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *httpError) {
	defer r.Body.Close()
	if r.ContentLength > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body of %d bytes, over the limit of %d", r.ContentLength, limit)
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, limit)
	switch coding := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); coding {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			return nil, readError(err, limit)
		}
		defer gz.Close()
		body = io.LimitReader(gz, limit+1)
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "Content-Encoding %q is not supported: send gzip or none", coding)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, readError(err, limit)
	}
	if int64(len(b)) > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "body over the limit of %d bytes decompressed", limit)
	}
	return b, nil
}

// readError is the answer to a body that could not be read: too large, or not gzip.
func readError(err error, limit int64) *httpError {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "body over the limit of %d bytes", limit)
	}
	return errorf(http.StatusBadRequest, "reading the body: %v", err)
}
