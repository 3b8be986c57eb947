package pager

import (
	"encoding/base64"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The worked example of docs/format.md ("Page tokens"): a layout's token.
func TestFormatDoc(t *testing.T) {
	const from, to = 1430222400, 1430226000 // 12:00 to 13:00 on 2015-04-28, in seconds
	binding := Bind("advanced/1/1000000000/240/3600", "cpu", from, to)
	token := Token{Binding: binding, After: 1430222676}.Encode()
	if want := formatdoc.Lines(t, "layout-token"); len(want) != 1 || token != want[0] {
		t.Errorf("token %s", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || string(raw) != string(formatdoc.Hex(t, "layout-token-bytes")) {
		t.Errorf("token bytes %x, %v", raw, err)
	}
	if got, err := DecodeToken(token, binding, from, to); err != nil || got.After != 1430222676 {
		t.Errorf("decodes to %+v, %v", got, err)
	}
}
