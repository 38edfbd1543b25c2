// Command go_consumer is a plain RocketMQ push consumer of the Go client
// (github.com/apache/rocketmq-client-go/v2, at the version go.mod pins) with an unmodified
// upstream allocation strategy, printing what it holds in the line protocol of
// tests/integration/rocketmq5_kit/programs/RebalanceConsumer.java, so RealConsumer parses both.
//
// Usage: go_consumer NAMESRV GROUP TOPIC[,TOPIC..] INSTANCE_NAME [CLIENT_IP|-] [RUN_SECONDS]
//
//	[AVG|AVG_BY_CIRCLE|CONSISTENT_HASH] [VIRTUAL_NODES]
//
// VIRTUAL_NODES is CONSISTENT_HASH's virtual node count (default 10, as Java's default).
//
// Lines on stdout (the client's own logging goes to stderr, at warn level):
//
//	[INSTANCE pid=PID] STARTED clientId=IP@INSTANCE strategy=NAME
//	[INSTANCE pid=PID] HOLDS topic=T [broker-a:0, broker-a:1]  whenever what it holds of T changes
//	[INSTANCE pid=PID] VIEW topic=T cidAll=[..]                  whenever its cidAll of T changes
//	[INSTANCE pid=PID] CONSUMED topic=T queue=broker-a:3 body=..
//	[INSTANCE pid=PID] DONE consumed=N holds={T=[..]}            after RUN_SECONDS, then Shutdown
//
// HOLDS is the client's process queue table (what it really pulls), read every 200 ms through
// the consumer's own GetConsumerRunningInfo, the method the client answers the broker's
// GET_CONSUMER_RUNNING_INFO with (its MQTable is built from processQueueTable). The method's
// result type is in the module's internal package, so it is called and read by reflection.
//
// VIEW: the Go client has no exported way to ask the broker for the group's consumer id list
// (defaultConsumer.findConsumerList is unexported, so reflection cannot call it). Instead the
// strategy is wrapped: doBalance hands every call the cidAll it just fetched from the broker,
// sorted with sort.Strings, and the wrapper prints it before calling the upstream function
// unchanged. So VIEW here is exactly the list the client allocated from, updated whenever it
// rebalances (every 20 s, and at once when the broker notifies a change), not on its own
// 2 s timer as the Java program's VIEW is. HOLDS never comes from the strategy's return value.
//
// CLIENT_IP: the Go client reads no environment variable or system property for it and has no
// option to set it (internal.ClientOptions.ClientIP, defaulting to the first non-loopback IPv4
// of an up interface, or "" when there is none). The options struct is unexported but the
// field is not, so withClientIP builds a consumer.Option by reflection that sets it before
// the client instance (and with it ClientID()) is created.
//
// One consumer per process (consumers sharing a clientId in one process share one client).
// SIGTERM ends the process without Shutdown; at RUN_SECONDS it calls Shutdown, which persists
// offsets but (in v2.1.2) sends no UNREGISTER_CLIENT: the broker drops the member when its
// connection closes.
package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

var (
	outMu sync.Mutex
	tag   string
)

func say(format string, args ...interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, tag+" "+format+"\n", args...)
}

// less is MessageQueue.compareTo: topic, then broker name (String.compareTo), then queue id.
// The names here are ASCII, where Java's UTF-16 order equals Go's byte order.
func less(a, b primitive.MessageQueue) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.QueueId < b.QueueId
}

// format is List.toString of "broker:queueId" for the queues of topic, sorted as Java sorts.
func format(mqs []primitive.MessageQueue, topic string) string {
	own := make([]primitive.MessageQueue, 0, len(mqs))
	for _, mq := range mqs {
		if mq.Topic == topic {
			own = append(own, mq)
		}
	}
	sort.Slice(own, func(i, j int) bool { return less(own[i], own[j]) })
	items := make([]string, len(own))
	for i, mq := range own {
		items[i] = mq.BrokerName + ":" + strconv.Itoa(mq.QueueId)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// processQueues is the keys of the consumer's processQueueTable, as its
// GetConsumerRunningInfo(false) reports them in MQTable.
func processQueues(c interface{}) ([]primitive.MessageQueue, error) {
	method := reflect.ValueOf(c).MethodByName("GetConsumerRunningInfo")
	if !method.IsValid() {
		return nil, fmt.Errorf("%T has no GetConsumerRunningInfo method", c)
	}
	out := method.Call([]reflect.Value{reflect.ValueOf(false)})
	if len(out) != 1 || out[0].Kind() != reflect.Ptr || out[0].IsNil() {
		return nil, fmt.Errorf("GetConsumerRunningInfo returned %v", out)
	}
	table := out[0].Elem().FieldByName("MQTable")
	if table.Kind() != reflect.Map {
		return nil, fmt.Errorf("ConsumerRunningInfo.MQTable is %v, not a map", table.Kind())
	}
	mqs := make([]primitive.MessageQueue, 0, table.Len())
	for _, key := range table.MapKeys() {
		mq, ok := key.Interface().(primitive.MessageQueue)
		if !ok {
			return nil, fmt.Errorf("MQTable key is %s, not primitive.MessageQueue", key.Type())
		}
		mqs = append(mqs, mq)
	}
	return mqs, nil
}

// clientIDOf is the consumer's rmqClient.ClientID(): the id it heartbeats with, so the one the
// broker lists. The client is an unexported field (defaultConsumer.client, an
// internal.RMQClient), so it is read by reflection and made callable with reflect.NewAt.
func clientIDOf(c interface{}) (string, error) {
	v := reflect.ValueOf(c)
	for v.Kind() == reflect.Ptr || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	field := v.FieldByName("client")
	if !field.IsValid() || !field.CanAddr() {
		return "", fmt.Errorf("%T has no addressable client field", c)
	}
	client := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
	method := client.MethodByName("ClientID")
	if !method.IsValid() {
		return "", fmt.Errorf("%s has no ClientID method", client.Type())
	}
	out := method.Call(nil)
	if len(out) != 1 || out[0].Kind() != reflect.String {
		return "", fmt.Errorf("ClientID returned %v", out)
	}
	return out[0].String(), nil
}

// withClientIP sets ClientOptions.ClientIP, which no upstream Option sets (see the top).
func withClientIP(ip string) consumer.Option {
	optionType := reflect.TypeOf(consumer.Option(nil))
	set := reflect.MakeFunc(optionType, func(args []reflect.Value) []reflect.Value {
		args[0].Elem().FieldByName("ClientIP").SetString(ip)
		return nil
	})
	return set.Interface().(consumer.Option)
}

func strategy(name string, virtualNodes int) (consumer.AllocateStrategy, error) {
	switch name {
	case "AVG":
		return consumer.AllocateByAveragely, nil
	case "AVG_BY_CIRCLE":
		return consumer.AllocateByAveragelyCircle, nil
	case "CONSISTENT_HASH":
		return consumer.AllocateByConsistentHash(virtualNodes), nil
	}
	return nil, fmt.Errorf("unknown strategy %q (AVG, AVG_BY_CIRCLE or CONSISTENT_HASH)", name)
}

// viewing wraps an upstream strategy to print the cidAll doBalance passes it for our topics.
func viewing(upstream consumer.AllocateStrategy, topics []string) consumer.AllocateStrategy {
	var mu sync.Mutex
	views := map[string]string{}
	wanted := map[string]bool{}
	for _, t := range topics {
		wanted[t] = true
	}
	return func(group, currentCID string, mqAll []*primitive.MessageQueue,
		cidAll []string) []*primitive.MessageQueue {
		if len(mqAll) > 0 && wanted[mqAll[0].Topic] {
			topic := mqAll[0].Topic
			view := "[" + strings.Join(cidAll, ", ") + "]"
			mu.Lock()
			if views[topic] != view {
				views[topic] = view
				say("VIEW topic=%s cidAll=%s", topic, view)
			}
			mu.Unlock()
		}
		return upstream(group, currentCID, mqAll, cidAll)
	}
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "go_consumer: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	args := os.Args[1:]
	if len(args) < 4 {
		fail("usage: go_consumer NAMESRV GROUP TOPIC[,TOPIC..] INSTANCE_NAME [CLIENT_IP|-] " +
			"[RUN_SECONDS] [AVG|AVG_BY_CIRCLE|CONSISTENT_HASH] [VIRTUAL_NODES]")
	}
	namesrv, group, topics, instance := args[0], args[1], strings.Split(args[2], ","), args[3]
	clientIP := ""
	if len(args) > 4 && args[4] != "" && args[4] != "-" {
		clientIP = args[4]
	}
	runSeconds := 60
	if len(args) > 5 {
		n, err := strconv.Atoi(args[5])
		if err != nil {
			fail("RUN_SECONDS %q: %v", args[5], err)
		}
		runSeconds = n
	}
	strategyName := "AVG"
	if len(args) > 6 {
		strategyName = args[6]
	}
	virtualNodes := 10
	if len(args) > 7 {
		n, err := strconv.Atoi(args[7])
		if err != nil {
			fail("VIRTUAL_NODES %q: %v", args[7], err)
		}
		virtualNodes = n
	}
	allocate, err := strategy(strategyName, virtualNodes)
	if err != nil {
		fail("%v", err)
	}

	rlog.SetLogLevel("warn") // logrus writes to stderr: stdout stays the protocol
	tag = fmt.Sprintf("[%s pid=%d]", instance, os.Getpid())

	options := []consumer.Option{
		consumer.WithGroupName(group),
		consumer.WithNameServer(primitive.NamesrvAddr{namesrv}),
		consumer.WithInstance(instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithStrategy(viewing(allocate, topics)),
	}
	if clientIP != "" {
		options = append(options, withClientIP(clientIP))
	}
	c, err := consumer.NewPushConsumer(options...)
	if err != nil {
		fail("NewPushConsumer: %v", err)
	}

	var consumed int64
	for _, topic := range topics {
		err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					atomic.AddInt64(&consumed, 1)
					broker, queueID := "", -1
					if m.Queue != nil {
						broker, queueID = m.Queue.BrokerName, m.Queue.QueueId
					}
					say("CONSUMED topic=%s queue=%s:%d body=%s", m.Topic, broker, queueID, string(m.Body))
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil {
			fail("Subscribe %s: %v", topic, err)
		}
	}
	if err := c.Start(); err != nil {
		fail("Start: %v", err)
	}
	clientID, err := clientIDOf(c)
	if err != nil {
		fail("reading the client id: %v", err)
	}
	say("STARTED clientId=%s strategy=%s", clientID, strategyName)

	held := map[string]string{}
	end := time.Now().Add(time.Duration(runSeconds) * time.Second)
	for time.Now().Before(end) {
		mqs, err := processQueues(c)
		if err != nil {
			fail("reading the process queue table: %v", err)
		}
		for _, topic := range topics {
			h := format(mqs, topic)
			if old, seen := held[topic]; !seen || old != h {
				say("HOLDS topic=%s %s", topic, h)
				held[topic] = h
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	holds := make([]string, 0, len(topics))
	for _, topic := range topics {
		holds = append(holds, topic+"="+held[topic])
	}
	say("DONE consumed=%d holds={%s}", atomic.LoadInt64(&consumed), strings.Join(holds, ", "))
	if err := c.Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "go_consumer: Shutdown: %v\n", err)
	}
	os.Exit(0)
}
