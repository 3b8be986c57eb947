package entity

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// viaService reshapes a body the way a read returns it: aztables decodes each entity into a
// map and marshals it again (sorted keys, numbers as float64, annotations kept), and Azurite
// drops the Double annotations.
func viaService(t testing.TB, body []byte, dropAnnotations bool) []byte {
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	if dropAnnotations {
		for k := range m {
			if strings.HasSuffix(k, "@odata.type") {
				delete(m, k)
			}
		}
	}
	m["odata.etag"] = `W/"datetime'2024-01-01T00%3A00%3A00.0000000Z'"`
	m["Timestamp"] = "2024-01-01T00:00:00.0000000Z"
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func encodeRow(pk, rk string, values map[int]float64) []byte {
	b := AppendKeys(nil, pk, rk)
	for slot := range 252 {
		if v, ok := values[slot]; ok {
			b = AppendSlot(b, slot, v)
		}
	}
	return AppendEnd(b)
}

func TestEncodeBody(t *testing.T) {
	tests := []struct {
		value float64
		want  string
	}{
		{0.25, `,"v7":0.25`},
		{2, `,"v7":2,"v7@odata.type":"Edm.Double"`},
		{-3, `,"v7":-3,"v7@odata.type":"Edm.Double"`},
		{1e300, `,"v7":1e+300`},
		{math.NaN(), `,"v7":"NaN","v7@odata.type":"Edm.Double"`},
		{math.Inf(1), `,"v7":"Infinity","v7@odata.type":"Edm.Double"`},
		{math.Inf(-1), `,"v7":"-Infinity","v7@odata.type":"Edm.Double"`},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, string(AppendSlot(nil, 7, tt.value)), tt.value)
	}
	require.Equal(t, `{"PartitionKey":"O'Brien","RowKey":"a\"b\\c\u0001","V":1.5}`,
		string(AppendEnd(AppendDouble(AppendKeys(nil, "O'Brien", "a\"b\\c\x01"), ValueProperty, 1.5))))
	// The body is valid JSON and keeps quotes in keys as they are (unlike aztables.EDMEntity).
	var m map[string]any
	require.NoError(t, json.Unmarshal(encodeRow("it's", "0001", map[int]float64{0: 1, 5: 2.5}), &m))
	require.Equal(t, "it's", m["PartitionKey"])
}

func TestRoundTripThroughService(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	specials := []float64{0, 1, -1, 2, 0.1, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1), 1e21, 123456789012345678, 1 << 53}
	for _, drop := range []bool{false, true} {
		values := map[int]float64{}
		for slot := range 240 {
			switch rng.IntN(4) {
			case 0:
				continue
			case 1:
				values[slot] = specials[rng.IntN(len(specials))]
			case 2:
				values[slot] = math.Float64frombits(rng.Uint64())
			default:
				values[slot] = float64(rng.IntN(1000))
			}
		}
		body := viaService(t, encodeRow(`séries "x" \ 温度`, "001430222640", values), drop)
		var e Entity
		require.NoError(t, e.Decode(body))
		require.Equal(t, `séries "x" \ 温度`, string(e.PartitionKey))
		require.Equal(t, "001430222640", string(e.RowKey))
		require.NotEmpty(t, e.ETag)
		require.Len(t, e.Props, len(values))
		for _, p := range e.Props {
			slot, ok := ParseSlotName(p.Name)
			require.True(t, ok, string(p.Name))
			want := values[slot]
			if math.IsNaN(want) {
				require.True(t, math.IsNaN(p.Value))
				continue
			}
			require.Equal(t, math.Float64bits(want), math.Float64bits(p.Value), "slot %d", slot)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, body, reason string
	}{
		{"not JSON", `nope`, "not a JSON object"},
		{"truncated", `{"PartitionKey":"a","RowKey":"b","v1":1`, "truncated"},
		{"string value", `{"PartitionKey":"a","RowKey":"b","v1":"hello"}`, `property "v1" has "hello", not a Double`},
		{"bool value", `{"PartitionKey":"a","RowKey":"b","v1":true}`, "not a Double"},
		{"int64 value", `{"PartitionKey":"a","RowKey":"b","v1":"5","v1@odata.type":"Edm.Int64"}`, "not a Double"},
		{"int64 annotation", `{"PartitionKey":"a","RowKey":"b","v1":5,"v1@odata.type":"Edm.Int64"}`, `"Edm.Int64", not Edm.Double`},
		{"trailing", `{"PartitionKey":"a","RowKey":"b"}x`, "data after"},
		{"bad escape", `{"PartitionKey":"a\q"}`, "bad escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Entity
			err := e.Decode([]byte(tt.body))
			var de *DecodeError
			require.True(t, errors.As(err, &de), "%v", err)
			require.Contains(t, de.Reason, tt.reason)
		})
	}
	// The error names the entity when its keys were read.
	var e Entity
	err := e.Decode([]byte(`{"PartitionKey":"cpu","RowKey":"0042","v1":[1]}`))
	require.ErrorContains(t, err, `PartitionKey "cpu" RowKey "0042"`)
}

// A property named in a $select that the entity lacks comes back null: it is no property.
func TestDecodeNull(t *testing.T) {
	e := Entity{AllowStrings: true, AllowNull: true}
	require.NoError(t, e.Decode([]byte(`{"PartitionKey":"a","RowKey":"b","v1":null,"v2":2,"s":null,"q":"AQ==","q@odata.type":"Edm.Binary"}`)))
	require.Equal(t, []Prop{{Name: []byte("v2"), Value: 2}}, e.Props)
	require.Len(t, e.Strings, 1)
	_, ok := e.String("s")
	require.False(t, ok)
	var strict Entity
	require.Error(t, strict.Decode([]byte(`{"PartitionKey":"a","RowKey":"b","v1":null}`)), "null without AllowNull")
	nulls := Entity{AllowNull: true}
	require.NoError(t, nulls.Decode([]byte(`{"PartitionKey":"a","RowKey":"b","v1":null}`)))
	require.Empty(t, nulls.Props)
	strict = Entity{AllowNull: true}
	for _, bad := range []string{`{"PartitionKey":"a","v1":nul}`, `{"PartitionKey":"a","v1":nullx}`, `{"v1":null`} {
		require.Error(t, strict.Decode([]byte(bad)), bad)
	}
}

func TestValidateSeries(t *testing.T) {
	good := []string{"cpu", "O'Brien", "températion", "温度", "a b", "🙂", strings.Repeat("x", 512)}
	for _, s := range good {
		require.NoError(t, ValidateSeries(s, 0), s)
	}
	bad := []string{"", "a/b", `a\b`, "a#b", "a?b", "a\x00", "a\x1f", "a\x7f", "a\u0085", "a\u009f",
		strings.Repeat("x", 513), strings.Repeat("温", 513), "\xff"}
	for _, s := range bad {
		require.ErrorIs(t, ValidateSeries(s, 0), tablets.ErrInvalidSeries, "%q", s)
	}
	// What the store adds to the key counts.
	require.ErrorIs(t, ValidateSeries(strings.Repeat("x", 500), 26), tablets.ErrInvalidSeries)
	// A character outside the BMP is two UTF-16 code units.
	require.Equal(t, 4, KeySize("🙂"))
	require.NoError(t, ValidateKey("cpu|0001"))
	require.Error(t, ValidateKey("cpu#0001"))
}

func TestBatches(t *testing.T) {
	small := func(int) int { return 100 }
	require.Nil(t, Batches(0, small))
	require.Equal(t, []int{1}, Batches(1, small))
	require.Equal(t, []int{100}, Batches(100, small))
	require.Equal(t, []int{100, 101}, Batches(101, small))
	require.Equal(t, []int{100, 200, 250}, Batches(250, small))
	// Large bodies: the 4 MiB payload binds before the 100 operations.
	large := func(int) int { return 300 << 10 }
	ends := Batches(40, large)
	prev := 0
	for _, end := range ends {
		bytes := 0
		for i := prev; i < end; i++ {
			bytes += large(i) + batchOverhead
		}
		require.LessOrEqual(t, bytes, MaxBatchBytes)
		prev = end
	}
	require.Equal(t, 40, prev)
	require.Greater(t, len(ends), 1)
}

func FuzzDecodeRoundTrip(f *testing.F) {
	f.Add("cpu", uint64(0x3ff0000000000000), uint64(0x7ff8000000000001), uint8(3))
	f.Add("O'Brien\"\\", uint64(0x8000000000000000), uint64(0x7ff0000000000000), uint8(251))
	f.Fuzz(func(t *testing.T, key string, a, b uint64, slot uint8) {
		va, vb := math.Float64frombits(a), math.Float64frombits(b)
		body := AppendKeys(nil, key, "0001")
		body = AppendSlot(body, int(slot), va)
		body = AppendDouble(body, "V", vb)
		body = AppendEnd(body)
		var e Entity
		if err := e.Decode(body); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		if !utf8ValidKey(key) {
			return // invalid UTF-8 is replaced; such keys are rejected before encoding anyway
		}
		if string(e.PartitionKey) != key || len(e.Props) != 2 {
			t.Fatalf("got %q %d props from %s", e.PartitionKey, len(e.Props), body)
		}
		for i, want := range []float64{va, vb} {
			got := e.Props[i].Value
			if math.IsNaN(want) {
				if !math.IsNaN(got) {
					t.Fatalf("NaN became %v", got)
				}
				continue
			}
			// -0 is written as "-0" and read back as -0.
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%v (%x) became %v (%x)", want, math.Float64bits(want), got, math.Float64bits(got))
			}
		}
	})
}

func FuzzDecodeNoPanic(f *testing.F) {
	f.Add([]byte(`{"PartitionKey":"a","RowKey":"b","v1":1.5,"v1@odata.type":"Edm.Double"}`))
	f.Add([]byte(`{"a":[{"b":"\u00e9\ud83d\ude42"}],"c":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Entity
		err := e.Decode(data)
		if err == nil && json.Valid(data) == false {
			t.Fatalf("accepted invalid JSON %q", data)
		}
	})
}

func utf8ValidKey(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
