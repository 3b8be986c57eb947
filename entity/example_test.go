package entity_test

import (
	"fmt"

	"github.com/seed71701133/tablets/entity"
)

func Example() {
	body := entity.AppendKeys(nil, "cpu|001430222400", "001430222640")
	body = entity.AppendSlot(body, 0, 0.25)
	body = entity.AppendSlot(body, 35, 2)
	body = entity.AppendEnd(body)
	fmt.Println(string(body))

	var e entity.Entity
	if err := e.Decode(body); err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range e.Props {
		slot, _ := entity.ParseSlotName(p.Name)
		fmt.Println(slot, p.Value)
	}
	// Output:
	// {"PartitionKey":"cpu|001430222400","RowKey":"001430222640","v0":0.25,"v35":2,"v35@odata.type":"Edm.Double"}
	// 0 0.25
	// 35 2
}
