package answers

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Body and Decode: bytes over several parts come back whole (the reply as the service
// gives it, with its Timestamp); an entity of another key or version is no answer; one
// without bytes, or that is not JSON, is an error; a key or bytes over the limits are
// ErrTooLarge.
func TestBodyDecode(t *testing.T) {
	b := bytes.Repeat([]byte("0123456789abcdef"), 3*PartBytes/16+7) // three parts and a bit
	body, err := Body("q", b)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), `"Edm.Binary"`); n != 4 {
		t.Errorf("%d binary properties, want 4", n)
	}
	reply := strings.Replace(string(body), `{`, `{"odata.etag":"W/\"x\"","Timestamp":"2026-12-03T10:00:00.1234567Z",`, 1)
	got, written, ok, err := Decode([]byte(reply), "q")
	if err != nil || !ok || !bytes.Equal(got, b) {
		t.Fatalf("Decode: %d bytes, %v, %v; want %d bytes", len(got), ok, err, len(b))
	}
	if written.Format("15:04:05.0000000") != "10:00:00.1234567" {
		t.Errorf("written %v", written)
	}
	if _, _, ok, err := Decode(body, "r"); ok || err != nil {
		t.Errorf("another key: %v, %v", ok, err)
	}
	v2 := strings.Replace(string(body), `"V":1`, `"V":2`, 1)
	if _, _, ok, err := Decode([]byte(v2), "q"); ok || err != nil {
		t.Errorf("version 2: %v, %v", ok, err)
	}
	if _, _, _, err := Decode([]byte(`{"V":1,"K":"q"}`), "q"); err == nil {
		t.Error("no bytes: no error")
	}
	if _, _, _, err := Decode([]byte(`{"V":1,"K":"q","D0":"not base64!"}`), "q"); err == nil {
		t.Error("a part that is not base64: no error")
	}
	if _, _, _, err := Decode([]byte(`[`), "q"); err == nil {
		t.Error("not JSON: no error")
	}
	if _, err := Body(strings.Repeat("k", MaxKeyBytes+1), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a long key: %v", err)
	}
	if _, err := Body("q", make([]byte, MaxBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too many bytes: %v", err)
	}
	if body, err := Body("q", make([]byte, MaxBytes)); err != nil || len(body) >= 1<<20 {
		t.Errorf("the most bytes: a body of %d bytes, %v; want under 1 MiB", len(body), err)
	}
}
