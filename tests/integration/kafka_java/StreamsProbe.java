// A real Kafka Streams application for the integration tests, run with group.protocol=streams
// (KIP-1071: the broker assigns its tasks). Its topology has state and a repartition, so it has
// two subtopologies: 0 reads the source topic and re-keys each record by its value, 1 counts per
// key in an in-memory store (with a changelog).
//
//   java StreamsProbe --bootstrap HOST:PORT --app-id APP --source TOPIC --state-dir DIR
//                     [--threads N] [--block-file PATH] [--stall-file PATH]
//                     [--replication-factor N]
//
// Prints one JSON object per line on stdout:
//   {"event":"started"}
//   {"event":"tasks","state":"RUNNING","threads":[{"client":"...-consumer",
//    "active":["0_1","1_1"],"standby":[]}]}     each time what its threads run changes
//   {"event":"stalled","thread":"..."} / {"event":"resumed","thread":"..."}
//   {"event":"closed"}
// "tasks" is KafkaStreams.metadataForLocalThreads(), polled every 100 ms: what this instance
// runs, the ground truth the tests compare the monitor with. While --block-file exists, each
// record's processing waits for it to go: the stream thread then neither finishes a batch nor
// lets go of tasks the broker moves away. While --stall-file exists, every active task's
// wall-clock punctuation (each 100 ms) waits for it to go, records or not: the stream thread
// stalls as in a long pause, and neither takes nor gives up a task until it resumes.
// "exit" on stdin closes the application and ends.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.Stores;

public class StreamsProbe {
    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i], args[i + 1]);
        }
        String blockFile = options.get("--block-file");
        Path block = blockFile == null ? null : Paths.get(blockFile);
        String stallFile = options.get("--stall-file");
        Path stall = stallFile == null ? null : Paths.get(stallFile);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, options.get("--app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, options.get("--bootstrap"));
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.STATE_DIR_CONFIG, options.get("--state-dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG,
                  Integer.parseInt(options.getOrDefault("--threads", "1")));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // What the broker creates a missing internal topic with (-1: its default).
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG,
                  Integer.parseInt(options.getOrDefault("--replication-factor", "-1")));
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(options.get("--source"))
            .peek((key, value) -> waitWhileBlocked(block))
            .processValues(() -> new Stall<String, String>(stall))
            .selectKey((key, value) -> value)
            .groupByKey()
            .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts")))
            .toStream()
            .processValues(() -> new Stall<String, Long>(stall));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.start();
        say("{\"event\":\"started\"}");

        Thread reporter = new Thread(() -> report(streams), "tasks-reporter");
        reporter.setDaemon(true);
        reporter.start();

        BufferedReader stdin = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.trim().equals("exit")) {
                break;
            }
        }
        streams.close(Duration.ofSeconds(20));
        say("{\"event\":\"closed\"}");
        System.exit(0);
    }

    static void waitWhileBlocked(Path block) {
        while (block != null && Files.exists(block)) {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    // In both subtopologies, so that a thread running any active task stalls.
    static final class Stall<K, V> implements FixedKeyProcessor<K, V, V> {
        private final Path file;
        private FixedKeyProcessorContext<K, V> context;

        Stall(Path file) {
            this.file = file;
        }

        @Override
        public void init(FixedKeyProcessorContext<K, V> context) {
            this.context = context;
            if (file != null) {
                context.schedule(Duration.ofMillis(100), PunctuationType.WALL_CLOCK_TIME,
                                 now -> stallWhile(file));
            }
        }

        @Override
        public void process(FixedKeyRecord<K, V> record) {
            context.forward(record);
        }
    }

    static void stallWhile(Path stall) {
        if (!Files.exists(stall)) {
            return;
        }
        String thread = quote(Thread.currentThread().getName());
        say("{\"event\":\"stalled\",\"thread\":" + thread + "}");
        waitWhileBlocked(stall);
        say("{\"event\":\"resumed\",\"thread\":" + thread + "}");
    }

    static void report(KafkaStreams streams) {
        String last = null;
        while (true) {
            try {
                String now = describe(streams);
                if (!now.equals(last)) {
                    say(now);
                    last = now;
                }
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                // metadataForLocalThreads while the instance starts or closes: ask again.
            }
        }
    }

    static String describe(KafkaStreams streams) {
        List<String> threads = new ArrayList<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            threads.add("{\"client\":" + quote(thread.consumerClientId())
                        + ",\"active\":" + tasks(thread.activeTasks())
                        + ",\"standby\":" + tasks(thread.standbyTasks()) + "}");
        }
        threads.sort(null);
        return "{\"event\":\"tasks\",\"state\":" + quote(streams.state().name())
               + ",\"threads\":[" + String.join(",", threads) + "]}";
    }

    static String tasks(Set<TaskMetadata> tasks) {
        TreeSet<String> ids = new TreeSet<>();
        for (TaskMetadata task : tasks) {
            ids.add(quote(task.taskId().toString()));
        }
        return "[" + String.join(",", ids) + "]";
    }

    static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
