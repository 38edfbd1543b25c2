/*
 * A real Java Kafka consumer the integration tests drive (tests/integration/kafka_consumers.py
 * compiles it with javac against the cached kafka-clients jar and runs it; no build tool).
 *
 *   java -cp <out>:<jars> ConsumerProbe --bootstrap 127.0.0.1:9092 --group g --topics a,b
 *        [--protocol classic|consumer] [--assignor range|roundrobin|sticky|cooperative-sticky
 *        (classic) or a server assignor name: uniform, range (consumer)] [--instance-id i]
 *        [--assign a:0,a:1] [--revoke-delay-ms N]
 *
 * stdout carries one JSON object a line, flushed at once:
 *   {"event":"started"}
 *   {"event":"assignment","member_id":"...","generation":N,"holds":[["a",0],...]}   (on change)
 *   {"event":"revoking","partitions":[...],"assigned":[...]}   (callback starts; assigned is
 *                                                               consumer.assignment() then)
 *   {"event":"revoked","assigned":[...]}                       (callback ends)
 *   {"event":"lost","partitions":[...]}                        (onPartitionsLost)
 *   {"event":"poll_error","message":"..."}    (poll() threw; it polls on, as an app would)
 *   {"event":"error","message":"..."}         (a fatal error; the probe closes, exit status 1)
 *   {"event":"closed"}                                         (after consumer.close())
 * A line "exit" on stdin, or its end, closes the consumer. --assign assigns those partitions by
 * hand (no subscription, so no group membership, though group.id is still set).
 * Logging: log4j2 at WARN on stderr unless -Dlog4j2.configurationFile names a configuration.
 */

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidGroupIdException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

public final class ConsumerProbe {
    private static final Map<String, String> CLASSIC_ASSIGNORS = Map.of(
        "range", "org.apache.kafka.clients.consumer.RangeAssignor",
        "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        "sticky", "org.apache.kafka.clients.consumer.StickyAssignor",
        "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
    private static final String LOG4J2 = String.join("\n",
        "rootLogger.level = WARN",
        "rootLogger.appenderRef.err.ref = err",
        "appender.err.type = Console",
        "appender.err.name = err",
        "appender.err.target = SYSTEM_ERR",
        "appender.err.layout.type = PatternLayout",
        "appender.err.layout.pattern = [%d] %p %m (%c)%n", "");

    private static final PrintStream OUT =
        new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
                        StandardCharsets.UTF_8);
    private static volatile boolean exitRequested = false;
    private static KafkaConsumer<byte[], byte[]> consumer;
    private static String lastReported = null;

    public static void main(String[] argv) throws Exception {
        quietLogging();
        Map<String, String> args = parse(argv);
        String protocol = args.getOrDefault("protocol", "classic");
        String assignor = args.get("assignor");
        long revokeDelayMs = Long.parseLong(args.getOrDefault("revoke-delay-ms", "0"));

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(args, "bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, required(args, "group"));
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");  // tests make topics
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (args.containsKey("instance-id")) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args.get("instance-id"));
        }
        if (protocol.equals("classic")) {
            // The consumer protocol refuses these: its broker decides them.
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            if (assignor != null) {
                String strategy = CLASSIC_ASSIGNORS.get(assignor);
                if (strategy == null) {
                    throw new IllegalArgumentException("unknown classic assignor " + assignor
                        + "; one of " + CLASSIC_ASSIGNORS.keySet());
                }
                props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, strategy);
            }
        } else if (assignor != null) {
            props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }

        Thread stdin = new Thread(ConsumerProbe::readStdin, "probe-stdin");
        stdin.setDaemon(true);
        int status = 0;
        try {
            consumer = new KafkaConsumer<>(props);
            if (args.containsKey("assign")) {
                consumer.assign(parsePartitions(args.get("assign")));
            } else {
                List<String> topics = Arrays.asList(required(args, "topics").split(","));
                consumer.subscribe(topics, new Listener(revokeDelayMs));
            }
            emit("{\"event\":\"started\"}");
            stdin.start();
            String lastError = null;
            while (!exitRequested) {
                try {
                    consumer.poll(Duration.ofMillis(100));
                    lastError = null;
                } catch (KafkaException e) {
                    if (isFatal(e)) {
                        throw e;
                    }
                    // Like an application that logs and polls on: report it (once in a row).
                    if (!e.toString().equals(lastError)) {
                        emit("{\"event\":\"poll_error\",\"message\":" + quote(e.toString()) + "}");
                    }
                    lastError = e.toString();
                    Thread.sleep(100);
                }
                report();
            }
        } catch (Exception e) {
            emit("{\"event\":\"error\",\"message\":" + quote(e.toString()) + "}");
            status = 1;
        } finally {
            if (consumer != null) {
                consumer.close();
                emit("{\"event\":\"closed\"}");
            }
        }
        System.exit(status);
    }

    /** Errors after which the consumer cannot go on (or polling again cannot help). */
    private static boolean isFatal(KafkaException e) {
        return e instanceof FencedInstanceIdException || e instanceof AuthenticationException
            || e instanceof AuthorizationException || e instanceof InvalidGroupIdException
            || e instanceof UnsupportedVersionException || e instanceof ConfigException;
    }

    /** Prints an assignment event when the assignment, member id or generation changed. */
    private static void report() {
        ConsumerGroupMetadata metadata = consumer.groupMetadata();
        String line = "{\"event\":\"assignment\",\"member_id\":" + quote(metadata.memberId())
            + ",\"generation\":" + metadata.generationId()
            + ",\"holds\":" + partitions(consumer.assignment()) + "}";
        if (!line.equals(lastReported)) {
            lastReported = line;
            emit(line);
        }
    }

    private static final class Listener implements ConsumerRebalanceListener {
        private final long revokeDelayMs;

        Listener(long revokeDelayMs) {
            this.revokeDelayMs = revokeDelayMs;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
            emit("{\"event\":\"revoking\",\"partitions\":" + partitions(revoked)
                 + ",\"assigned\":" + partitions(consumer.assignment()) + "}");
            if (revokeDelayMs > 0) {
                try {
                    Thread.sleep(revokeDelayMs);  // a consumer committing slowly
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            emit("{\"event\":\"revoked\",\"assigned\":" + partitions(consumer.assignment()) + "}");
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
            report();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> lost) {
            emit("{\"event\":\"lost\",\"partitions\":" + partitions(lost) + "}");
        }
    }

    private static void readStdin() {
        try (BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("exit")) {
                    break;
                }
            }
        } catch (Exception e) {
            // stdin gone: the same as its end
        }
        exitRequested = true;
    }

    private static synchronized void emit(String line) {
        OUT.println(line);
        OUT.flush();
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort(Comparator.comparing(TopicPartition::topic)
                    .thenComparingInt(TopicPartition::partition));
        StringBuilder json = new StringBuilder("[");
        for (TopicPartition tp : sorted) {
            if (json.length() > 1) {
                json.append(',');
            }
            json.append('[').append(quote(tp.topic())).append(',').append(tp.partition()).append(']');
        }
        return json.append(']').toString();
    }

    private static List<TopicPartition> parsePartitions(String spec) {
        List<TopicPartition> result = new ArrayList<>();
        for (String item : spec.split(",")) {
            int colon = item.lastIndexOf(':');
            if (colon <= 0) {
                throw new IllegalArgumentException("--assign wants topic:partition, got " + item);
            }
            result.add(new TopicPartition(item.substring(0, colon),
                                          Integer.parseInt(item.substring(colon + 1))));
        }
        return result;
    }

    private static String quote(String text) {
        StringBuilder json = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        return json.append('"').toString();
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("arguments are --key value pairs; at " + argv[i]);
            }
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        return args;
    }

    private static String required(Map<String, String> args, String key) {
        String value = args.get(key);
        if (value == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return value;
    }

    /** Without a configuration of its own, log4j2 would print errors on stdout, among the JSON. */
    private static void quietLogging() throws Exception {
        if (System.getProperty("log4j2.configurationFile") != null) {
            return;
        }
        Path config = Files.createTempFile("consumer-probe-log4j2", ".properties");
        config.toFile().deleteOnExit();
        Files.writeString(config, LOG4J2);
        System.setProperty("log4j2.configurationFile", config.toString());
    }
}
