"""Test doubles for the producer commands' unit tests (not a test module itself):

- LockedFakeProducer: tests/unit/fake_producer.FakeProducer made safe to poll from a background
  thread while another produces (the simulator and the Outbox do), with len() as
  confluent-kafka's (records not yet answered).
- FakeAdmin / FakeMetadata: kafka-python's admin client and confluent-kafka's AdminClient as
  observe-kafka uses them, scripted poll by poll: each call takes the next answer of its script,
  and an exception in the script is raised instead.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from tests.unit.fake_producer import FakeProducer


class LockedFakeProducer(FakeProducer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.RLock()

    def produce(self, *args, **kwargs):
        with self._lock:
            return super().produce(*args, **kwargs)

    def poll(self, timeout=None):
        with self._lock:
            return super().poll(timeout)

    def flush(self, timeout=None):
        with self._lock:
            return super().flush(timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self.queued)


class Script:
    """Answers in order; the last one repeats. An exception instance is raised."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, *args, **kwargs):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, BaseException):
            raise answer
        return answer(*args, **kwargs) if callable(answer) else answer


class FakeAdmin:
    """list_groups / describe_groups / list_group_offsets / describe_consumer_groups /
    describe_share_groups / describe_streams_groups from scripts."""

    def __init__(self, list_groups: Script, describe_groups: Script,
                 list_group_offsets: Script | None = None,
                 describe_consumer_groups: Script | None = None,
                 describe_share_groups: Script | None = None,
                 describe_streams_groups: Script | None = None) -> None:
        self.list_groups = list_groups
        self.describe_groups = describe_groups
        self.list_group_offsets = list_group_offsets or Script({})
        self.describe_consumer_groups = describe_consumer_groups or Script({})
        self.describe_share_groups = describe_share_groups or Script({})
        self.describe_streams_groups = describe_streams_groups or Script({})
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _Answered:
    """A future already answered."""

    def __init__(self, value) -> None:
        self._value = value

    def result(self, timeout=None):
        return self._value


class FakeMetadata:
    """confluent-kafka AdminClient.list_topics(timeout=...) -> .topics {name: metadata}, and
    describe_configs(resources) -> {resource: future} whose result is {name: entry}; its script
    answers {resource name: {config: value}}."""

    def __init__(self, list_topics: Script, describe_configs: Script | None = None) -> None:
        self._list_topics = list_topics
        self._describe_configs = describe_configs or Script({})

    def describe_configs(self, resources, request_timeout=None):
        answer = self._describe_configs()
        return {resource: _Answered({name: SimpleNamespace(value=str(value))
                                     for name, value in answer.get(resource.name, {}).items()})
                for resource in resources}

    def list_topics(self, timeout=None):
        answer = self._list_topics()
        return SimpleNamespace(topics={
            name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(count)))
            for name, count in answer.items()})
