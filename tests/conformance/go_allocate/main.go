// Command go_allocate runs the RocketMQ Go client's own queue-allocation strategies
// (github.com/apache/rocketmq-client-go/v2/consumer) over JSON cases, one per line on stdin,
// and prints each case back with the results as one JSON line on stdout.
//
// Input line:  {"id", "strategy", "params", "group", "queues": [{"topic","broker","queue_id"}],
//
//	"clients": [...], "for_clients": [...], "tags": [...]}
//
// Output line: the same case without "for_clients", plus "results" (client id -> its share,
// each queue as [topic, broker, queue_id], in the strategy's order) and, when a strategy call
// panicked, "errors" (client id -> "panic: <recovered value>", with a null result).
//
// Inputs are sorted exactly as defaultConsumer.doBalance sorts them before calling the strategy.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type queue struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int    `json:"queue_id"`
}

type params struct {
	VirtualNodes *int     `json:"virtual_nodes"`
	ConsumerIdcs []string `json:"consumer_idcs"`
}

type inputCase struct {
	ID         string          `json:"id"`
	Strategy   string          `json:"strategy"`
	Params     json.RawMessage `json:"params"`
	Group      string          `json:"group"`
	Queues     json.RawMessage `json:"queues"`
	Clients    []string        `json:"clients"`
	ForClients []string        `json:"for_clients"`
	Tags       json.RawMessage `json:"tags"`
}

type outputCase struct {
	ID       string          `json:"id"`
	Strategy string          `json:"strategy"`
	Params   json.RawMessage `json:"params"`
	Group    string          `json:"group"`
	Queues   json.RawMessage `json:"queues"`
	Clients  []string        `json:"clients"`
	Results  ordered         `json:"results"`
	Errors   ordered         `json:"errors,omitempty"`
	Tags     json.RawMessage `json:"tags"`
}

// ordered is a JSON object whose keys keep the order of for_clients (a Go map would sort them).
type ordered []entry

type entry struct {
	key   string
	value interface{}
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		key, err := marshal(e.key)
		if err != nil {
			return nil, err
		}
		value, err := marshal(e.value)
		if err != nil {
			return nil, err
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(value)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func marshal(v interface{}) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func strategyFor(name string, p params) (consumer.AllocateStrategy, error) {
	switch name {
	case "GO_AVG":
		return consumer.AllocateByAveragely, nil
	case "GO_AVG_BY_CIRCLE":
		return consumer.AllocateByAveragelyCircle, nil
	case "GO_MACHINE_ROOM_NEARBY":
		return consumer.AllocateByMachineNearby, nil
	case "GO_CONSISTENT_HASH":
		if p.VirtualNodes == nil {
			return nil, fmt.Errorf("GO_CONSISTENT_HASH needs params.virtual_nodes")
		}
		return consumer.AllocateByConsistentHash(*p.VirtualNodes), nil
	case "GO_MACHINE_ROOM":
		return consumer.AllocateByMachineRoom(p.ConsumerIdcs), nil
	}
	return nil, fmt.Errorf("unknown strategy %q", name)
}

// sortForBalance is the sorting of defaultConsumer.doBalance (consumer/consumer.go), copied
// statement for statement: the client does it inline, so it cannot be called.
func sortForBalance(mqAll []*primitive.MessageQueue, cidAll []string) {
	sort.Strings(cidAll)
	sort.SliceStable(mqAll, func(i, j int) bool {
		v := strings.Compare(mqAll[i].Topic, mqAll[j].Topic)
		if v != 0 {
			return v < 0
		}

		v = strings.Compare(mqAll[i].BrokerName, mqAll[j].BrokerName)
		if v != 0 {
			return v < 0
		}
		return (mqAll[i].QueueId - mqAll[j].QueueId) < 0
	})
}

// call runs one strategy call; a panic becomes the error text (the client's rebalance
// goroutine recovers it too, in primitive.WithRecover).
func call(strategy consumer.AllocateStrategy, group, cid string, mqAll []*primitive.MessageQueue,
	cidAll []string) (result []*primitive.MessageQueue, panicText string) {
	defer func() {
		if r := recover(); r != nil {
			result, panicText = nil, fmt.Sprintf("panic: %v", r)
		}
	}()
	return strategy(group, cid, mqAll, cidAll), ""
}

func run(line []byte) (*outputCase, error) {
	var in inputCase
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, err
	}
	var p params
	if len(in.Params) > 0 {
		if err := json.Unmarshal(in.Params, &p); err != nil {
			return nil, fmt.Errorf("params: %w", err)
		}
	}
	var qs []queue
	if err := json.Unmarshal(in.Queues, &qs); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	strategy, err := strategyFor(in.Strategy, p)
	if err != nil {
		return nil, err
	}
	mqAll := make([]*primitive.MessageQueue, len(qs))
	for i, q := range qs {
		mqAll[i] = &primitive.MessageQueue{Topic: q.Topic, BrokerName: q.Broker, QueueId: q.QueueID}
	}
	cidAll := append([]string{}, in.Clients...)
	sortForBalance(mqAll, cidAll)

	out := &outputCase{ID: in.ID, Strategy: in.Strategy, Params: in.Params, Group: in.Group,
		Queues: in.Queues, Clients: in.Clients, Tags: in.Tags, Results: ordered{}}
	seen := map[string]bool{}
	for _, cid := range in.ForClients {
		if seen[cid] {
			continue
		}
		seen[cid] = true
		// A fresh copy per call: a strategy must not see another call's mutations.
		mqs := append([]*primitive.MessageQueue{}, mqAll...)
		cids := append([]string{}, cidAll...)
		result, panicText := call(strategy, in.Group, cid, mqs, cids)
		if panicText != "" {
			out.Results = append(out.Results, entry{cid, nil})
			out.Errors = append(out.Errors, entry{cid, panicText})
			continue
		}
		share := make([][3]interface{}, 0, len(result))
		for _, mq := range result {
			share = append(share, [3]interface{}{mq.Topic, mq.BrokerName, mq.QueueId})
		}
		out.Results = append(out.Results, entry{cid, share})
	}
	if len(in.Params) == 0 {
		out.Params = json.RawMessage("{}")
	}
	if len(in.Tags) == 0 {
		out.Tags = json.RawMessage("[]")
	}
	return out, nil
}

func main() {
	rlog.SetLogLevel("error") // the strategies warn on every client outside cidAll
	reader := bufio.NewReaderSize(os.Stdin, 1<<20)
	writer := bufio.NewWriter(os.Stdout)
	defer writer.Flush()
	for lineNo := 1; ; lineNo++ {
		line, readErr := reader.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			out, err := run(line)
			if err != nil {
				writer.Flush()
				fmt.Fprintf(os.Stderr, "go_allocate: line %d: %v\n", lineNo, err)
				os.Exit(2)
			}
			data, err := marshal(out)
			if err != nil {
				writer.Flush()
				fmt.Fprintf(os.Stderr, "go_allocate: line %d: %v\n", lineNo, err)
				os.Exit(2)
			}
			writer.Write(data)
			writer.WriteByte('\n')
		}
		if readErr != nil {
			break
		}
	}
}
