package redact

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// sasSig is the signature of a SAS token: base64 with +, / and = percent-encoded, as it
// appears in a URL.
const sasSig = "c2VjcmV0U2lnbmF0dXJlLW5vdC10by1sZWFr%2B%2F%3D"

const sasQuery = "sv=2019-02-02&ss=t&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&st=2020-01-01T00:00:00Z&spr=https&sig=" + sasSig

func TestSecrets(t *testing.T) {
	for in, want := range map[string]string{
		"GET https://acct.table.core.windows.net/t()?$filter=x&" + sasQuery + ": dial tcp: refused": "GET https://acct.table.core.windows.net/t()?$filter=x&sv=2019-02-02&ss=t&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&st=2020-01-01T00:00:00Z&spr=https&sig=REDACTED: dial tcp: refused",
		"sig=abc+/def==&se=1":                              "sig=REDACTED&se=1",
		"next=https%3A%2F%2Fh%2Ft%3Fsig%3Dabc%2B%26se%3D1": "next=https%3A%2F%2Fh%2Ft%3Fsig%3DREDACTED%26se%3D1",
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=REDACTED;EndpointSuffix=core.windows.net",
		"TableEndpoint=https://h/;SharedAccessSignature=sv=2019&sig=xyz":                                                                         "TableEndpoint=https://h/;SharedAccessSignature=REDACTED&sig=REDACTED",
		"Authorization: SharedKey acct:Zm9vYmFy+/= (rejected)":                                                                                   "Authorization: SharedKey acct:REDACTED (rejected)",
		`"signature":"x", design=2, config=1`:                                                                                                    `"signature":"x", design=2, config=1`,
		"too many samples":                                                                                                                       "too many samples",
	} {
		require.Equal(t, want, Secrets(in), "%s", in)
	}
}
