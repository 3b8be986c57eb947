package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The lease entity of docs/format.md ("Rule group leases").
func TestFormatDocRuleLease(t *testing.T) {
	file, name := "/etc/tablets/rules/api.yml", "api"
	rec := leaseRecord{Holder: "web-1-4242-9e3779b9", Length: LeaseLength(DefaultLeaseMin, time.Minute),
		Last: time.Date(2024, 5, 23, 0, 5, 30, 123e6, time.UTC).UnixMilli(), File: file, Name: name}
	body := appendLease(LeaseRowKey(file, name), rec)
	require.Equal(t, string(formatdoc.JSON(t, "rule-lease")), string(body))
	got, err := decodeLease(body)
	require.NoError(t, err)
	require.Equal(t, rec, got)
}

// What the service answers: the Timestamp, annotations, the ETag in the body.
func TestDecodeLease(t *testing.T) {
	got, err := decodeLease([]byte(`{"odata.etag":"W/\"datetime'2024-05-23T00%3A05%3A30.2Z'\"","PartitionKey":"rulelease",` +
		`"RowKey":"6101bb6157ab7a3b3e7ac7efc266fcc3","Timestamp":"2024-05-23T00:05:30.2000000Z","Timestamp@odata.type":"Edm.DateTime",` +
		`"V":1,"H":"","L":30000,"T":0,"F":"f","N":"n","X":"later"}`))
	require.NoError(t, err)
	require.Equal(t, leaseRecord{Length: 30 * time.Second, File: "f", Name: "n",
		Written: time.Date(2024, 5, 23, 0, 5, 30, 2e8, time.UTC)}, got)
	for _, bad := range []string{
		``, `[]`, `{}`,
		`{"V":2,"H":"a","L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":"1","H":"a","L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":1,"L":1000,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":0,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000.5,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":31622400001,"T":0,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":-1,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":"NaN","F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":1e300,"F":"f","N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":0,"N":"n"}`,
		`{"V":1,"H":"a","L":1000,"T":0,"F":"f","N":"n","Timestamp":"yesterday"}`,
	} {
		_, err := decodeLease([]byte(bad))
		require.ErrorIs(t, err, ErrBadLease, bad)
	}
}

// F and N are cut at 1,024 bytes, at a character; the RowKey hashes the whole.
func TestLeaseTextCut(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	rec, err := decodeLease(appendLease(LeaseRowKey(long, "n"), leaseRecord{Length: time.Second, File: long, Name: "n\xff"}))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("é", 512), rec.File)
	require.Equal(t, "n\uFFFD", rec.Name)
	require.NotEqual(t, LeaseRowKey(long, "n"), LeaseRowKey(rec.File, "n"))
	require.NotEqual(t, LeaseRowKey("ab", "c"), LeaseRowKey("a", "bc"))
}

func FuzzDecodeLease(f *testing.F) {
	f.Add(appendLease("k", leaseRecord{Holder: "h", Length: time.Minute, Last: 1716422730123, File: "f", Name: "n"}))
	f.Add([]byte(`{"Timestamp":"2024-05-23T00:05:30.2000000Z","V":1,"H":"","L":30000,"T":0,"F":"f","N":"n"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeLease(b)
		if err != nil {
			return
		}
		again, err := decodeLease(appendLease(LeaseRowKey(rec.File, rec.Name), rec))
		require.NoError(t, err)
		rec.Written = time.Time{}
		if len(rec.File) <= leaseTextMax && len(rec.Name) <= leaseTextMax {
			// Strings of valid UTF-8 within the bound come back as they were.
			require.Equal(t, rec.Holder, again.Holder)
			require.Equal(t, rec.Length, again.Length)
			require.Equal(t, rec.Last, again.Last)
		}
		require.LessOrEqual(t, len(again.File), leaseTextMax)
	})
}
