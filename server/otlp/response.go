package otlp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/seed71701133/tablets/server/internal/redact"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/protobuf/encoding/protowire"
)

// partial is a partial success: samples refused as bad input while the others were stored.
type partial struct {
	rejected int64
	msg      string
}

// writeExportResponse answers 200 with an ExportMetricsServiceResponse whose partial_success
// carries p and the warnings (absent when there are neither).
func writeExportResponse(w http.ResponseWriter, enc encoding, p *partial, warnings []string) {
	resp := pmetricotlp.NewExportResponse()
	var msgs []string
	if p != nil {
		resp.PartialSuccess().SetRejectedDataPoints(p.rejected)
		msgs = append(msgs, p.msg)
	}
	if len(warnings) > 0 {
		msgs = append(msgs, "warnings: "+list(warnings))
	}
	resp.PartialSuccess().SetErrorMessage(validUTF8(strings.Join(msgs, "; ")))
	var (
		body []byte
		err  error
	)
	if enc == encJSON {
		body, err = resp.MarshalJSON()
	} else {
		body, err = resp.MarshalProto()
	}
	if err != nil {
		// Everything is stored; an answer without a body says so as well.
		w.WriteHeader(http.StatusOK)
		return
	}
	write(w, enc, http.StatusOK, body)
}

// writeStatus answers a failure with a google.rpc.Status holding its message, as OTLP/HTTP
// requires (its code is optional and left out).
func writeStatus(w http.ResponseWriter, enc encoding, e *httpError) {
	msg := validUTF8(redact.Secrets(e.msg))
	var body []byte
	if enc == encJSON {
		body, _ = json.Marshal(struct {
			Message string `json:"message"`
		}{msg}) // cannot fail: a struct of a string
	} else {
		body = statusProto(msg)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	write(w, enc, e.status, body)
}

// statusProto encodes google.rpc.Status{message: msg}: field 2, a string.
func statusProto(msg string) []byte {
	b := protowire.AppendTag(nil, 2, protowire.BytesType)
	return protowire.AppendString(b, msg)
}

func write(w http.ResponseWriter, enc encoding, status int, body []byte) {
	w.Header().Set("Content-Type", enc.contentType())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client is gone; nothing to do
}

// validUTF8 keeps a message a valid protobuf string: it may quote names from the request,
// which the decoder does not check.
func validUTF8(msg string) string { return strings.ToValidUTF8(msg, "\uFFFD") }
