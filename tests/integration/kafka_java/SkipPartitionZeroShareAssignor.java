import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.ShareGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.modern.MemberAssignmentImpl;

/**
 * A share-group assignor for a broker's group.share.assignors that gives partition 0 of every
 * topic to no member: Kafka's own SimpleAssignor, then partition 0 dropped. The broker writes
 * whatever its assignor returns and checks no coverage, so a custom assignor can leave a
 * subscribed partition unread; this one does it on purpose, for the tests.
 */
public class SkipPartitionZeroShareAssignor implements ShareGroupPartitionAssignor {
    private final SimpleAssignor simple = new SimpleAssignor();

    @Override
    public String name() {
        return "skip-partition-zero";
    }

    @Override
    public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber topics)
            throws PartitionAssignorException {
        Map<String, MemberAssignment> members = new HashMap<>();
        simple.assign(spec, topics).members().forEach((member, assignment) -> {
            Map<Uuid, Set<Integer>> kept = new HashMap<>();
            assignment.partitions().forEach((topic, partitions) -> {
                Set<Integer> rest = new HashSet<>(partitions);
                rest.remove(0);
                if (!rest.isEmpty()) {
                    kept.put(topic, rest);
                }
            });
            members.put(member, new MemberAssignmentImpl(kept));
        });
        return new GroupAssignment(members);
    }
}
