"""The remoting codec on frames captured from a real RocketMQ 4.9.8 (tests/data/rocketmq), the
fastjson dialect, ACL signing, and the client's request matching against FakeRemotingServer (a
stand-in socket server: the real servers are in the integration tests)."""

import base64
import hashlib
import hmac
import socket
import struct
import threading
from pathlib import Path

import pytest

from producers.rocketmq import fastjson
from producers.rocketmq.admin import MalformedBody, NoRunningInfo, RocketMQAdmin
from producers.rocketmq.frames import (
    JSON,
    LANGUAGES,
    RESPONSE_FLAG,
    ROCKETMQ,
    Command,
    FrameError,
    decode,
    encode,
    split_frames,
)
from producers.rocketmq.remoting import (
    AclSigner,
    RemotingClient,
    RemotingConnectError,
    RemotingTimeout,
)

pytestmark = pytest.mark.unit

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "rocketmq"


def captured(name: str) -> Command:
    frames = split_frames(bytearray((CAPTURES / name).read_bytes()))
    assert len(frames) == 1
    return decode(frames[0])


def test_a_json_header_response_decodes():
    response = captured("cluster_info.json_header.frame")
    assert (response.code, response.serialize_type, response.opaque) == (0, JSON, 7)
    assert response.is_response and response.language == "JAVA" and response.version == 409


def test_a_binary_header_response_decodes():
    response = captured("cluster_info.binary_header.frame")
    assert (response.code, response.serialize_type, response.opaque) == (0, ROCKETMQ, 7)
    assert response.is_response and response.language == "JAVA"
    assert fastjson.loads(response.body)["brokerAddrTable"]["broker-b"]["brokerAddrs"] == {
        0: "127.0.0.1:20921"}


@pytest.mark.parametrize("name, address", [
    ("route.unquoted_keys.binary_header.frame", "127.0.0.1:20921"),
    ("route.quoted_keys.json_header.frame", "127.0.0.1:20911"),
])
def test_a_route_body_parses_in_both_key_forms(name, address):
    body = fastjson.loads(captured(name).body)
    addrs = body["brokerDatas"][0]["brokerAddrs"]
    assert addrs.get(0, addrs.get("0")) == address
    (queue_data,) = body["queueDatas"]
    assert queue_data["perm"] & 4 and queue_data["readQueueNums"] in (4, 8)


def test_an_error_response_keeps_its_code_and_remark():
    response = captured("route.topic_not_exist.frame")
    assert response.code == 17 and "NoSuchTopic" in response.remark and response.body == b""


def test_a_fastjson_mq_table_is_keyed_by_message_queues():
    body = fastjson.loads(captured("running_info.frame").body)
    queues = {(q["topic"], q["brokerName"], q["queueId"]): state["droped"]
              for q, state in body["mqTable"].items()}
    assert queues == {("%RETRY%g1", "broker-a", 0): False, **{
        ("T8", "broker-a", i): False for i in range(4)}}
    assert body["properties"]["allocateMessageQueueStrategy"].startswith(
        "org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely@")


def test_the_cpp_clients_empty_mq_table_parses_as_an_empty_map():
    # ConsumerRunningInfo::encode of rocketmq-client-cpp with nothing held, as it builds it.
    body = fastjson.loads(b'{"mqTable":},"jstack":"","properties":{"PROP_CLIENT_VERSION":'
                          b'"2.0.0"},"subscriptionSet":[{"topic":"T"}]}')
    assert body == {"mqTable": {}, "jstack": "", "properties": {"PROP_CLIENT_VERSION": "2.0.0"},
                    "subscriptionSet": [{"topic": "T"}]}


def test_fastjson_object_keys_do_not_depend_on_field_order():
    a = fastjson.loads('{"t":{{"topic":"T","queueId":1,"brokerName":"b"}:1}}')
    b = fastjson.loads('{"t":{{"brokerName":"b","queueId":1,"topic":"T"}:1}}')
    assert a == b and list(a["t"])[0]["queueId"] == 1


@pytest.mark.parametrize("text", ['{"a":1', '{"a" 1}', "{1:}x", "[1,,2]", '{[1]:2}'])
def test_fastjson_rejects_what_is_neither_json_nor_fastjson(text):
    with pytest.raises(ValueError):
        fastjson.loads(text)


@pytest.mark.parametrize("serialize_type", [JSON, ROCKETMQ])
def test_encode_then_decode_is_the_same_command(serialize_type):
    command = Command(code=307, opaque=42, flag=RESPONSE_FLAG, version=409, language="JAVA",
                      remark="r", ext_fields={"consumerGroup": "g", "clientId": "c@1"},
                      body=b'{"x":1}', serialize_type=serialize_type)
    frame = encode(command)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert frame[4] == serialize_type  # the header word's high byte
    assert decode(frame[4:]) == command



def test_every_language_keeps_its_byte_in_the_binary_header():
    """LanguageCode's byte is its place in LANGUAGES (RocketMQ 5's order, NODE_JS = 13)."""
    assert LANGUAGES.index("GO") == 9 and LANGUAGES.index("NODE_JS") == 13
    for code, language in enumerate(LANGUAGES):
        frame = encode(Command(code=1, opaque=1, language=language, serialize_type=ROCKETMQ))
        assert frame[10] == code         # after the length, the header word, the int16 code
        assert decode(frame[4:]).language == language

def test_split_frames_keeps_a_partial_frame_for_later():
    whole = encode(Command(code=1, opaque=1)) + encode(Command(code=2, opaque=2))
    buffer = bytearray(whole[:-3])
    assert [decode(f).code for f in split_frames(buffer)] == [1]
    buffer += whole[-3:]
    assert [decode(f).code for f in split_frames(buffer)] == [2]
    assert buffer == bytearray()


def test_a_corrupt_frame_is_an_error_not_a_crash():
    with pytest.raises(FrameError):
        decode(struct.pack(">i", (0 << 24) | 50) + b"{}")
    with pytest.raises(FrameError):
        decode(struct.pack(">i", (1 << 24) | 3) + b"abc")
    with pytest.raises(FrameError):
        split_frames(bytearray(struct.pack(">i", -5)))


def test_acl_signature_is_hmac_sha1_of_the_sorted_values_and_the_body():
    signed = AclSigner("ak", "sk").sign({"topic": "T", "consumerGroup": "g"}, b"BODY")
    content = b"ak" + b"g" + b"T" + b"BODY"  # AccessKey, consumerGroup, topic: key order
    expected = base64.b64encode(hmac.new(b"sk", content, hashlib.sha1).digest()).decode()
    assert signed == {"topic": "T", "consumerGroup": "g", "AccessKey": "ak", "Signature": expected}


class FakeRemotingServer:
    """A stand-in server on loopback: answers each request by `respond(command)` (None: stay
    silent), in reverse order of arrival when asked to, so matching by opaque is exercised."""

    def __init__(self, respond, reverse_pairs: bool = False) -> None:
        self._respond = respond
        self._reverse = reverse_pairs
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn) -> None:
        buffer, held = bytearray(), []
        with conn:
            while chunk := conn.recv(65536):
                buffer += chunk
                for frame in split_frames(buffer):
                    request = decode(frame)
                    if request.code == 999:
                        return  # drop the connection
                    answer = self._respond(request)
                    if answer is not None:
                        held.append(encode(answer))
                    if not self._reverse or len(held) == 2:
                        for data in reversed(held) if self._reverse else held:
                            conn.sendall(data)
                        held = []

    def close(self) -> None:
        self._listener.close()


def echo(request: Command) -> Command:
    return Command(code=0, opaque=request.opaque, flag=RESPONSE_FLAG, remark=str(request.code),
                   serialize_type=ROCKETMQ, body=request.ext_fields.get("n", "").encode())


def test_responses_are_matched_to_requests_by_opaque():
    server = FakeRemotingServer(echo, reverse_pairs=True)
    client = RemotingClient()
    results = {}

    def ask(n):
        results[n] = client.call(server.address, 100 + n, {"n": str(n)}, timeout_s=5).body

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {0: b"0", 1: b"1"}
    assert server.connections == 1  # one connection per address
    client.close()
    server.close()


def test_a_silent_server_times_out_and_a_dropped_connection_is_replaced():
    server = FakeRemotingServer(lambda r: None if r.code == 1 else echo(r))
    client = RemotingClient()
    with pytest.raises(RemotingTimeout):
        client.call(server.address, 1, timeout_s=0.2)
    assert client.call(server.address, 2, {"n": "x"}).body == b"x"  # the same connection
    with pytest.raises(Exception):  # noqa: B017 - closed by the peer: the call fails at once
        client.call(server.address, 999, timeout_s=5)
    assert client.call(server.address, 3, {"n": "y"}).body == b"y"
    assert server.connections == 2
    client.close()
    server.close()


def test_nobody_listening_is_a_connect_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RemotingConnectError):
        RemotingClient(connect_timeout_s=1).call(f"127.0.0.1:{port}", 106)


def test_admin_parses_a_captured_running_info():
    class Replay:
        def call(self, address, code, fields=None, body=b"", timeout_s=5.0):
            return captured("running_info.frame")

    info = RocketMQAdmin(Replay(), ["n:9876"]).running_info("b:10911", "g1", "c")
    assert info.owned == (("%RETRY%g1", "broker-a", 0),
                          *(("T8", "broker-a", i) for i in range(4)))
    assert info.strategy_class == "AllocateMessageQueueAveragely"
    assert info.topics == ("%RETRY%g1", "T8")


@pytest.mark.parametrize("body, remark, owned", [
    # rocketmq-client-go 2.1.2 once it has consumed: success, no body, the encoder's error.
    (b"", "json marshal error: json: unsupported value: NaN", None),
    (b'{"properties":{},"subscriptionSet":[]}', None, None),
    # The C++ client's empty table, `"mqTable":}`: an answer, holding nothing.
    (b'{"mqTable":},"jstack":"","properties":{}}', None, ()),
], ids=["go-nan", "no-table", "cpp-empty"])
def test_a_running_info_without_its_queue_table_is_no_answer_of_what_the_client_holds(
        body, remark, owned):
    class Client:
        def call(self, address, code, fields=None, body_=b"", timeout_s=5.0):
            return Command(code=0, opaque=1, flag=RESPONSE_FLAG, remark=remark, body=body)

    admin = RocketMQAdmin(Client(), ["n:9876"])
    if owned is not None:
        assert admin.running_info("b:10911", "g", "c").owned == owned
        return
    with pytest.raises(NoRunningInfo) as raised:
        admin.running_info("b:10911", "g", "c")
    assert raised.value.cause == "no_running_info"
    assert str(raised.value) == "running info of c without its queue table" + (
        f": {remark}" if remark else "")


def test_admin_asks_what_a_broker_assigns_and_reads_its_answer():
    """QUERY_ASSIGNMENT (400): a JSON body in, the broker's fastjson set of assignments out;
    a null set is "no assignment" (the client keeps what it had), not an empty one."""
    answers = {
        "T": b'{"messageQueueAssignments":[{"attachments":{},"messageQueue":{"brokerName":'
             b'"broker-b","queueId":1,"topic":"T"},"mode":"PULL"},{"attachments":{},'
             b'"messageQueue":{"brokerName":"broker-a","queueId":3,"topic":"T"},"mode":"PULL"}]}',
        "U": b"{}",
        "V": b'{"messageQueueAssignments":[]}',
        "W": b'{"messageQueueAssignments":[{"mode":"PULL"}]}'}
    sent = []

    class Broker:
        def call(self, address, code, fields=None, body=b"", timeout_s=5.0):
            request = fastjson.loads(body)
            sent.append((code, request))
            return Command(code=0, opaque=1, flag=RESPONSE_FLAG, body=answers[request["topic"]])

    admin = RocketMQAdmin(Broker(), ["n:9876"])
    assert admin.query_assignment("b:10911", "T", "g", "c1", "AVG") == (("broker-a", 3),
                                                                       ("broker-b", 1))
    assert sent == [(400, {"topic": "T", "consumerGroup": "g", "clientId": "c1",
                           "strategyName": "AVG", "messageModel": "CLUSTERING"})]
    assert admin.query_assignment("b:10911", "U", "g", "c1", "AVG") is None
    assert admin.query_assignment("b:10911", "V", "g", "c1", "AVG") == ()
    with pytest.raises(MalformedBody):
        admin.query_assignment("b:10911", "W", "g", "c1", "AVG")


def test_a_lite_consumers_topics_are_asked_by_parent_topic_group_and_client():
    """GET_LITE_CLIENT_INFO (5.5): the broker keeps lite topics as LMQs, %LMQ%$parent$name."""
    sent = []

    class Broker:
        def call(self, address, code, fields=None, body=b"", timeout_s=5.0):
            sent.append((code, fields))
            return Command(code=0, opaque=1, flag=RESPONSE_FLAG, body=(
                b'{"clientId":"c1","group":"g","lastAccessTime":1,"liteTopicCount":2,'
                b'"liteTopicSet":["%LMQ%$P$orders-2","%LMQ%$P$orders-1"],"parentTopic":"P"}'))

    admin = RocketMQAdmin(Broker(), ["n:9876"])
    assert admin.lite_topics("b:10911", "P", "g", "c1") == ("orders-1", "orders-2")
    assert sent == [(200077, {"parentTopic": "P", "group": "g", "clientId": "c1",
                              "maxCount": "10000"})]
