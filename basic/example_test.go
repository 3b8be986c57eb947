package basic_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/basic"
)

// Write a point and read the last hour back. (Needs an account: not run by go test.)
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
	store, err := basic.New(client, &basic.Options{Resolution: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Write(ctx, "cpu", tablets.Point{Time: time.Now(), Value: 0.25}); err != nil {
		log.Fatal(err)
	}
	for p, err := range store.Query(ctx, "cpu", time.Now().Add(-time.Hour), time.Now().Add(time.Second)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(p.Time, p.Value)
	}
}
