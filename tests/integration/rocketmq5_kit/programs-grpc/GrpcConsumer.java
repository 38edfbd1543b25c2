import java.time.Duration;
import java.util.*;
import org.apache.rocketmq.client.apis.*;
import org.apache.rocketmq.client.apis.consumer.*;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * A gRPC PushConsumer, SimpleConsumer or LitePushConsumer through a proxy.
 * Usage: GrpcConsumer PROXY GROUP TOPIC push|simple|lite RUN_SECONDS [LITE_TOPIC,...]
 * A lite consumer binds TOPIC (a parent topic of message.type LITE, its group bound to it by
 * lite.bind.topic), subscribes each LITE_TOPIC, and prints the set it then holds:
 * "LITE topics=a,b" (its own word, for the tests' ground truth).
 */
public class GrpcConsumer {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0], group = args[1], topic = args[2], kind = args[3];
        int runSeconds = Integer.parseInt(args[4]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint).enableSsl(false).build();
        FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
        long end = System.currentTimeMillis() + runSeconds * 1000L;
        if (kind.equals("lite")) {
            LitePushConsumer c = provider.newLitePushConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup(group).bindTopic(topic)
                .setMessageListener(m -> { System.out.println("CONSUMED topic=" + m.getTopic() + " id=" + m.getMessageId()); return ConsumeResult.SUCCESS; })
                .build();
            for (String lite : args.length > 5 ? args[5].split(",") : new String[0]) {
                if (!lite.isEmpty()) c.subscribeLite(lite);
            }
            System.out.println("LITE topics=" + String.join(",", new TreeSet<>(c.getLiteTopicSet())));
            System.out.println("STARTED kind=lite");
            while (System.currentTimeMillis() < end) Thread.sleep(200);
            c.close();
        } else if (kind.equals("push")) {
            PushConsumer c = provider.newPushConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, all))
                .setMessageListener(m -> { System.out.println("CONSUMED topic=" + m.getTopic() + " id=" + m.getMessageId()); return ConsumeResult.SUCCESS; })
                .build();
            System.out.println("STARTED kind=push");
            while (System.currentTimeMillis() < end) Thread.sleep(200);
            c.close();
        } else {
            SimpleConsumer c = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
                .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, all))
                .setAwaitDuration(Duration.ofSeconds(5)).build();
            System.out.println("STARTED kind=simple");
            while (System.currentTimeMillis() < end) {
                for (MessageView m : c.receive(16, Duration.ofSeconds(15))) {
                    System.out.println("CONSUMED topic=" + m.getTopic() + " id=" + m.getMessageId());
                    c.ack(m);
                }
            }
            c.close();
        }
        System.out.println("DONE");
        System.exit(0);
    }
}
