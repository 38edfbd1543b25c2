/*
 * Groups for bench_observer: N groups of one type, M members each, made and kept alive on a real
 * Apache Kafka broker through its own group protocols (kafka-clients' message classes over
 * plain sockets, no consumer library), so that thousands of groups cost one JVM.
 *
 *   java -cp <out>:<jars> GroupLoad --bootstrap 127.0.0.1:9092 --type classic|consumer|share|streams
 *        --groups 1000 --members 3 --topic t --partitions 6 [--prefix bench] [--threads 16]
 *
 * classic:  JoinGroup (twice: the broker hands out the member id) and SyncGroup, the leader
 *           assigning the topic's partitions round-robin (ConsumerProtocol, as a real consumer),
 *           then an OffsetCommit of every partition; sessions of 30 minutes, so no heartbeat.
 * consumer: ConsumerGroupHeartbeat (KIP-848), each member reporting back what it was assigned.
 * share:    ShareGroupHeartbeat (KIP-932).
 * streams:  StreamsGroupHeartbeat (KIP-1071), a one-subtopology stateless topology on the topic,
 *           each member reporting back its tasks.
 * The last three heartbeat every 5 s (the brokers' default session is 45 s).
 *
 * stdout: {"event":"ready","groups":N,"members":N*M,"seconds":S} once every member has joined
 * (and, for the heartbeat types, been given its first assignment), then nothing. A line on stdin,
 * or its end, stops it. Errors go to stderr; the first error answer ends it with status 1.
 */

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatResponseData;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatRequestData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.message.SyncGroupRequestData;
import org.apache.kafka.common.message.SyncGroupResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.requests.RequestUtils;
import org.apache.kafka.common.requests.ResponseHeader;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BiFunction;

public final class GroupLoad {
    private static final int HEARTBEAT_MS = 5_000;
    private static final int CLASSIC_SESSION_MS = 1_800_000;

    private final Map<String, String> options;
    private final String topic;
    private final int groups;
    private final int members;
    private final int partitions;
    private volatile boolean stopping;

    private GroupLoad(Map<String, String> options) {
        this.options = options;
        this.topic = options.get("topic");
        this.groups = Integer.parseInt(options.getOrDefault("groups", "1000"));
        this.members = Integer.parseInt(options.getOrDefault("members", "3"));
        this.partitions = Integer.parseInt(options.getOrDefault("partitions", "6"));
    }

    /** One connection; one request in flight, or several sent before their answers are read. */
    static final class Connection implements AutoCloseable {
        private final Socket socket;
        private final DataInputStream in;
        private final DataOutputStream out;
        private int correlation;

        Connection(String bootstrap) throws IOException {
            String[] hostPort = bootstrap.split(",")[0].split(":");
            socket = new Socket(hostPort[0], Integer.parseInt(hostPort[1]));
            socket.setTcpNoDelay(true);
            in = new DataInputStream(socket.getInputStream());
            out = new DataOutputStream(socket.getOutputStream());
        }

        // OffsetCommit from v10 names topics by id only; the group load names them.
        static short version(ApiKeys key) {
            return key == ApiKeys.OFFSET_COMMIT ? 9 : key.latestVersion();
        }

        void send(ApiKeys key, ApiMessage request) throws IOException {
            short version = version(key);
            RequestHeaderData header = new RequestHeaderData().setRequestApiKey(key.id)
                .setRequestApiVersion(version).setClientId("group-load")
                .setCorrelationId(++correlation);
            ByteBuffer bytes = RequestUtils.serialize(header, key.requestHeaderVersion(version),
                                                      request, version);
            out.writeInt(bytes.remaining());
            out.write(bytes.array(), bytes.arrayOffset() + bytes.position(), bytes.remaining());
            out.flush();
        }

        <T> T receive(ApiKeys key, BiFunction<Readable, Short, T> parse) throws IOException {
            short version = version(key);
            byte[] frame = new byte[in.readInt()];
            in.readFully(frame);
            ByteBuffer buffer = ByteBuffer.wrap(frame);
            ResponseHeader.parse(buffer, key.responseHeaderVersion(version));
            return parse.apply(new ByteBufferAccessor(buffer), version);
        }

        <T> T call(ApiKeys key, ApiMessage request, BiFunction<Readable, Short, T> parse)
                throws IOException {
            send(key, request);
            return receive(key, parse);
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    /** The coordinator not there yet: a new broker makes __consumer_offsets on first ask. */
    static boolean notYet(short errorCode) {
        return errorCode == Errors.NOT_COORDINATOR.code()
            || errorCode == Errors.COORDINATOR_NOT_AVAILABLE.code()
            || errorCode == Errors.COORDINATOR_LOAD_IN_PROGRESS.code();
    }

    static void check(short errorCode, String what) {
        if (errorCode != Errors.NONE.code()) {
            throw new IllegalStateException(what + ": " + Errors.forCode(errorCode).name());
        }
    }

    private String group(int index) {
        return options.getOrDefault("prefix", "bench") + "-" + options.get("type") + "-" + index;
    }

    // classic -----------------------------------------------------------------------------

    private void classic(int threads) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int worker = t;
            done.add(pool.submit(() -> {
                List<Connection> sockets = new ArrayList<>();
                try {
                    for (int m = 0; m < members; m++) {
                        sockets.add(new Connection(options.get("bootstrap")));
                    }
                    for (int g = worker; g < groups; g += threads) {
                        classicGroup(group(g), sockets);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                return null;
            }));
        }
        for (Future<?> f : done) {
            f.get();
        }
        pool.shutdown();
    }

    private JoinGroupRequestData join(String group, String memberId) {
        ByteBuffer subscription = ConsumerProtocol.serializeSubscription(
            new ConsumerPartitionAssignor.Subscription(List.of(topic)));
        JoinGroupRequestData.JoinGroupRequestProtocolCollection protocols =
            new JoinGroupRequestData.JoinGroupRequestProtocolCollection();
        protocols.add(new JoinGroupRequestData.JoinGroupRequestProtocol().setName("range")
            .setMetadata(bytes(subscription)));
        return new JoinGroupRequestData().setGroupId(group).setMemberId(memberId)
            .setSessionTimeoutMs(CLASSIC_SESSION_MS).setRebalanceTimeoutMs(60_000)
            .setProtocolType("consumer").setProtocols(protocols);
    }

    /** Every member joins (all before any answer is read: one rebalance for all), the leader
     *  assigns, everyone syncs, the leader commits an offset per partition. */
    private void classicGroup(String group, List<Connection> sockets) throws IOException {
        List<String> ids = new ArrayList<>();
        for (Connection c : sockets) {
            JoinGroupResponseData first = c.call(ApiKeys.JOIN_GROUP, join(group, ""),
                                                 JoinGroupResponseData::new);
            for (int tries = 0; notYet(first.errorCode()) && tries < 120; tries++) {
                pause(500);
                first = c.call(ApiKeys.JOIN_GROUP, join(group, ""), JoinGroupResponseData::new);
            }
            if (first.errorCode() != Errors.MEMBER_ID_REQUIRED.code()) {
                check(first.errorCode(), "JoinGroup " + group);
            }
            ids.add(first.memberId());
        }
        for (int m = 0; m < sockets.size(); m++) {
            sockets.get(m).send(ApiKeys.JOIN_GROUP, join(group, ids.get(m)));
        }
        List<JoinGroupResponseData> joined = new ArrayList<>();
        for (Connection c : sockets) {
            JoinGroupResponseData answer = c.receive(ApiKeys.JOIN_GROUP, JoinGroupResponseData::new);
            check(answer.errorCode(), "JoinGroup " + group);
            joined.add(answer);
        }
        int generation = joined.get(0).generationId();
        for (int m = 0; m < sockets.size(); m++) {
            JoinGroupResponseData answer = joined.get(m);
            SyncGroupRequestData sync = new SyncGroupRequestData().setGroupId(group)
                .setGenerationId(generation).setMemberId(answer.memberId())
                .setProtocolType("consumer").setProtocolName("range");
            if (answer.leader().equals(answer.memberId())) {
                sync.setAssignments(assign(answer.members()));
            }
            sockets.get(m).send(ApiKeys.SYNC_GROUP, sync);
        }
        String leader = joined.get(0).leader();
        for (Connection c : sockets) {
            check(c.receive(ApiKeys.SYNC_GROUP, SyncGroupResponseData::new).errorCode(),
                  "SyncGroup " + group);
        }
        List<OffsetCommitRequestData.OffsetCommitRequestPartition> offsets = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            offsets.add(new OffsetCommitRequestData.OffsetCommitRequestPartition()
                .setPartitionIndex(p).setCommittedOffset(0));
        }
        OffsetCommitRequestData commit = new OffsetCommitRequestData().setGroupId(group)
            .setGenerationIdOrMemberEpoch(generation).setMemberId(leader)
            .setTopics(List.of(new OffsetCommitRequestData.OffsetCommitRequestTopic()
                .setName(topic).setPartitions(offsets)));
        OffsetCommitResponseData committed = sockets.get(0).call(
            ApiKeys.OFFSET_COMMIT, commit, OffsetCommitResponseData::new);
        for (OffsetCommitResponseData.OffsetCommitResponseTopic t : committed.topics()) {
            for (OffsetCommitResponseData.OffsetCommitResponsePartition p : t.partitions()) {
                check(p.errorCode(), "OffsetCommit " + group);
            }
        }
    }

    private List<SyncGroupRequestData.SyncGroupRequestAssignment> assign(
            List<JoinGroupResponseData.JoinGroupResponseMember> joined) {
        List<SyncGroupRequestData.SyncGroupRequestAssignment> out = new ArrayList<>();
        for (int m = 0; m < joined.size(); m++) {
            List<TopicPartition> held = new ArrayList<>();
            for (int p = m; p < partitions; p += joined.size()) {
                held.add(new TopicPartition(topic, p));
            }
            out.add(new SyncGroupRequestData.SyncGroupRequestAssignment()
                .setMemberId(joined.get(m).memberId())
                .setAssignment(bytes(ConsumerProtocol.serializeAssignment(
                    new ConsumerPartitionAssignor.Assignment(held)))));
        }
        return out;
    }

    // the heartbeat types ---------------------------------------------------------------

    /** A member of a broker-assigned group: its id, its epoch, what it last reported. */
    static final class Member {
        final String group;
        final String id = Uuid.randomUuid().toString();
        final String process = Uuid.randomUuid().toString();
        int epoch;
        boolean assigned;
        Object held;    // consumer: its partitions; streams: its active tasks

        Member(String group) {
            this.group = group;
        }
    }

    /** False while the coordinator is not there yet for a joining member (asked again next
     *  round); an error answer otherwise ends the load. */
    private static boolean answered(Member m, short errorCode, String message, String api) {
        if (m.epoch == 0 && notYet(errorCode)) {
            return false;
        }
        check(errorCode, api + " " + m.group + " (" + message + ")");
        return true;
    }

    private ApiMessage consumerBeat(Member m) {
        ConsumerGroupHeartbeatRequestData beat = new ConsumerGroupHeartbeatRequestData()
            .setGroupId(m.group).setMemberId(m.id).setMemberEpoch(m.epoch);
        if (m.epoch == 0) {
            beat.setRebalanceTimeoutMs(60_000).setSubscribedTopicNames(List.of(topic))
                .setTopicPartitions(List.of());
        } else if (m.held != null) {
            @SuppressWarnings("unchecked")
            List<ConsumerGroupHeartbeatRequestData.TopicPartitions> held =
                (List<ConsumerGroupHeartbeatRequestData.TopicPartitions>) m.held;
            beat.setTopicPartitions(held);
        }
        return beat;
    }

    private void consumerAnswer(Member m, ConsumerGroupHeartbeatResponseData answer) {
        if (!answered(m, answer.errorCode(), answer.errorMessage(), "ConsumerGroupHeartbeat")) {
            return;
        }
        m.epoch = answer.memberEpoch();
        if (answer.assignment() != null) {
            List<ConsumerGroupHeartbeatRequestData.TopicPartitions> held = new ArrayList<>();
            for (ConsumerGroupHeartbeatResponseData.TopicPartitions tp :
                     answer.assignment().topicPartitions()) {
                held.add(new ConsumerGroupHeartbeatRequestData.TopicPartitions()
                    .setTopicId(tp.topicId()).setPartitions(tp.partitions()));
            }
            m.held = held;
            m.assigned = true;
        } else if (m.epoch > 0 && m.held != null) {
            m.held = null;       // reported: left out until it changes
        }
    }

    private ApiMessage shareBeat(Member m) {
        ShareGroupHeartbeatRequestData beat = new ShareGroupHeartbeatRequestData()
            .setGroupId(m.group).setMemberId(m.id).setMemberEpoch(m.epoch);
        if (m.epoch == 0) {
            beat.setSubscribedTopicNames(List.of(topic));
        }
        return beat;
    }

    private void shareAnswer(Member m, ShareGroupHeartbeatResponseData answer) {
        if (!answered(m, answer.errorCode(), answer.errorMessage(), "ShareGroupHeartbeat")) {
            return;
        }
        m.epoch = answer.memberEpoch();
        m.assigned |= answer.assignment() != null;
    }

    private ApiMessage streamsBeat(Member m) {
        StreamsGroupHeartbeatRequestData beat = new StreamsGroupHeartbeatRequestData()
            .setGroupId(m.group).setMemberId(m.id).setMemberEpoch(m.epoch);
        if (m.epoch == 0) {
            beat.setRebalanceTimeoutMs(60_000).setProcessId(m.process)
                .setTopology(new StreamsGroupHeartbeatRequestData.Topology().setEpoch(0)
                    .setSubtopologies(List.of(new StreamsGroupHeartbeatRequestData.Subtopology()
                        .setSubtopologyId("0").setSourceTopics(List.of(topic)))))
                .setActiveTasks(List.of()).setStandbyTasks(List.of()).setWarmupTasks(List.of())
                .setClientTags(List.of());
        } else if (m.held != null) {
            @SuppressWarnings("unchecked")
            List<StreamsGroupHeartbeatRequestData.TaskIds> held =
                (List<StreamsGroupHeartbeatRequestData.TaskIds>) m.held;
            beat.setActiveTasks(held).setStandbyTasks(List.of()).setWarmupTasks(List.of());
        }
        return beat;
    }

    private void streamsAnswer(Member m, StreamsGroupHeartbeatResponseData answer) {
        if (!answered(m, answer.errorCode(), answer.errorMessage(), "StreamsGroupHeartbeat")) {
            return;
        }
        m.epoch = answer.memberEpoch();
        if (answer.activeTasks() != null) {
            List<StreamsGroupHeartbeatRequestData.TaskIds> held = new ArrayList<>();
            for (StreamsGroupHeartbeatResponseData.TaskIds t : answer.activeTasks()) {
                held.add(new StreamsGroupHeartbeatRequestData.TaskIds()
                    .setSubtopologyId(t.subtopologyId()).setPartitions(t.partitions()));
            }
            m.held = held;
            m.assigned = true;
        } else if (m.epoch > 0 && m.held != null) {
            m.held = null;
        }
    }

    /** One heartbeat of every member, pipelined on one connection. */
    private void beatAll(Connection c, List<Member> all) throws IOException {
        String type = options.get("type");
        int window = 200;                       // requests sent ahead of their answers
        for (int start = 0; start < all.size(); start += window) {
            List<Member> slice = all.subList(start, Math.min(all.size(), start + window));
            for (Member m : slice) {
                switch (type) {
                    case "consumer" -> c.send(ApiKeys.CONSUMER_GROUP_HEARTBEAT, consumerBeat(m));
                    case "share" -> c.send(ApiKeys.SHARE_GROUP_HEARTBEAT, shareBeat(m));
                    default -> c.send(ApiKeys.STREAMS_GROUP_HEARTBEAT, streamsBeat(m));
                }
            }
            for (Member m : slice) {
                switch (type) {
                    case "consumer" -> consumerAnswer(m, c.receive(ApiKeys.CONSUMER_GROUP_HEARTBEAT,
                        ConsumerGroupHeartbeatResponseData::new));
                    case "share" -> shareAnswer(m, c.receive(ApiKeys.SHARE_GROUP_HEARTBEAT,
                        ShareGroupHeartbeatResponseData::new));
                    default -> streamsAnswer(m, c.receive(ApiKeys.STREAMS_GROUP_HEARTBEAT,
                        StreamsGroupHeartbeatResponseData::new));
                }
            }
        }
    }

    private void heartbeating(long started) throws Exception {
        List<Member> all = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            for (int m = 0; m < members; m++) {
                all.add(new Member(group(g)));
            }
        }
        try (Connection c = new Connection(options.get("bootstrap"))) {
            boolean ready = false;
            while (!stopping) {
                long round = System.currentTimeMillis();
                beatAll(c, all);
                if (!ready && all.stream().allMatch(m -> m.assigned)) {
                    ready = true;
                    ready(started);
                }
                long pause = ready ? HEARTBEAT_MS - (System.currentTimeMillis() - round) : 200;
                if (pause > 0) {
                    Thread.sleep(pause);
                }
            }
        }
    }

    private void ready(long started) {
        System.out.printf("{\"event\":\"ready\",\"groups\":%d,\"members\":%d,\"seconds\":%.1f}%n",
                          groups, groups * members, (System.currentTimeMillis() - started) / 1e3);
        System.out.flush();
    }

    /** Until the broker coordinates groups: its first FindCoordinator makes __consumer_offsets. */
    private void awaitCoordinator() throws IOException {
        try (Connection c = new Connection(options.get("bootstrap"))) {
            for (int tries = 0; tries < 120; tries++) {
                FindCoordinatorResponseData answer = c.call(ApiKeys.FIND_COORDINATOR,
                    new FindCoordinatorRequestData().setKeyType((byte) 0)
                        .setCoordinatorKeys(List.of(group(0))), FindCoordinatorResponseData::new);
                if (answer.coordinators().stream().allMatch(k -> k.errorCode() == 0)) {
                    return;
                }
                pause(500);
            }
        }
        throw new IllegalStateException("no group coordinator after 60 s");
    }

    private void run() throws Exception {
        long started = System.currentTimeMillis();
        awaitCoordinator();
        Thread stopper = new Thread(() -> {
            try {
                System.in.read();
            } catch (IOException ignored) {
                // stdin gone: stop as on a line
            }
            stopping = true;
            if ("classic".equals(options.get("type"))) {
                System.exit(0);
            }
        });
        stopper.setDaemon(true);
        stopper.start();
        if ("classic".equals(options.get("type"))) {
            classic(Integer.parseInt(options.getOrDefault("threads", "16")));
            ready(started);
            while (!stopping) {
                Thread.sleep(1000);
            }
        } else {
            heartbeating(started);
        }
    }

    private static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.duplicate().get(out);
        return out;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        try {
            new GroupLoad(options).run();
        } catch (Exception e) {
            System.err.println("group-load: " + e);
            System.exit(1);
        }
        System.exit(0);
    }
}
