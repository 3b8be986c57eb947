package basic

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
)

func offlineClient(t *testing.T) *aztables.Client {
	client, err := aztables.NewClientWithNoCredential("http://127.0.0.1:1/devstoreaccount1/t", nil)
	require.NoError(t, err)
	return client
}

func TestNewOptions(t *testing.T) {
	client := offlineClient(t)
	s, err := New(client, nil)
	require.NoError(t, err)
	require.Equal(t, Options{Resolution: time.Millisecond, Concurrency: 8}, s.Options())

	for name, opts := range map[string]Options{
		"negative resolution":  {Resolution: -time.Second},
		"resolution too fine":  {Resolution: time.Nanosecond},
		"negative concurrency": {Concurrency: -2},
	} {
		_, err := New(client, &opts)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
	}
	_, err = New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}

// The range filter is one clause of three comparisons; a name with quotes stays one literal.
func TestClauses(t *testing.T) {
	s, err := New(offlineClient(t), &Options{Resolution: time.Second})
	require.NoError(t, err)
	from, _ := s.eng.Layout().Format().Units(time.Date(2015, 4, 28, 12, 0, 0, 0, time.UTC))
	clauses := s.eng.Layout().Clauses("O'Brien", from, from+3600)
	require.Len(t, clauses, 1)
	require.Equal(t, "PartitionKey eq 'O''Brien' and RowKey ge '001430222400' and RowKey lt '001430226000'", clauses[0].String())
	parsed, err := filter.Parse(clauses[0].String())
	require.NoError(t, err)
	require.True(t, parsed.Eval(map[string]string{"PartitionKey": "O'Brien", "RowKey": "001430222400"}))
	require.False(t, parsed.Eval(map[string]string{"PartitionKey": "O'Brien", "RowKey": "001430226000"}))
	require.False(t, parsed.Eval(map[string]string{"PartitionKey": "O", "RowKey": "001430222400"}))
}
