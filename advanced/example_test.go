package advanced_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
)

// Write a day at 1 Hz (24 transactions) and read it back in one request. (Needs an account:
// not run by go test.)
func Example() {
	ctx := context.Background()
	service, err := aztables.NewServiceClientFromConnectionString(os.Getenv("AZURE_TABLES_CONNECTION_STRING"), nil)
	if err != nil {
		log.Fatal(err)
	}
	client := service.NewClient("metrics")
	if err := tablets.EnsureTable(ctx, client); err != nil {
		log.Fatal(err)
	}
	store, err := advanced.New(client, nil) // 1h partitions, 4m rows, 1s resolution
	if err != nil {
		log.Fatal(err)
	}
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	points := make([]tablets.Point, 86400)
	for i := range points {
		points[i] = tablets.Point{Time: day.Add(time.Duration(i) * time.Second), Value: float64(i % 60)}
	}
	var werr *tablets.WriteError
	if err := store.Write(ctx, "cpu", points...); errors.As(err, &werr) {
		log.Fatalf("%d points not stored: %v", len(werr.Failed), err)
	}
	n := 0
	for _, err := range store.Query(ctx, "cpu", day, day.Add(24*time.Hour)) {
		if err != nil {
			log.Fatal(err)
		}
		n++
	}
	fmt.Println(n, "points")
}
