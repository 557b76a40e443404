package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// helloBody is what GET /hello answers, as in the frameworks' own
// hello-world benchmarks.
const helloBody = "Hello, World!"

// jsonSize is the size of the /json answer as encoding/json writes it.
const jsonSize = 4096

// document is the /json answer: a list of items, as an API returns, padded
// to jsonSize bytes. Its fields are integers and plain ASCII strings, so
// every JSON encoder writes the same bytes and a check can compare values.
type document struct {
	Items []item `json:"items"`
	Pad   string `json:"pad"`
}

type item struct {
	ID    int      `json:"id"`
	Name  string   `json:"name"`
	Tags  []string `json:"tags"`
	Count int      `json:"count"`
}

// theDocument is the one document every server answers with; servers
// marshal it anew for each request.
var theDocument = newDocument()

// newDocument builds the items and sizes the padding so that the document
// marshals to exactly jsonSize bytes.
func newDocument() document {
	var d document
	for i := 0; ; i++ {
		next := d
		next.Items = append(next.Items[:len(next.Items):len(next.Items)], item{
			ID: 1000 + i, Name: fmt.Sprintf("item-%04d", i),
			Tags: []string{"alpha", "beta", fmt.Sprintf("t%d", i%7)}, Count: i * 37 % 1000,
		})
		if encodedLen(next) > jsonSize {
			break
		}
		d = next
	}
	d.Pad = strings.Repeat("x", jsonSize-encodedLen(d))
	return d
}

func encodedLen(d document) int {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // a document of ints and strings always marshals
	}
	return len(b)
}
