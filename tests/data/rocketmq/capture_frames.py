"""Capture real response frames from a running RocketMQ kit into this folder (see README.md).

    python tests/data/rocketmq/capture_frames.py NAMESRV_JSON NAMESRV_BINARY BROKER GROUP CLIENT_ID

Each file is one whole frame as it came off the socket (length word included).
"""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

from producers.rocketmq.frames import JSON, ROCKETMQ, Command, encode

HERE = Path(__file__).parent


def capture(address: str, code: int, fields: dict, version: int, name: str,
            serialize_type: int = JSON) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(encode(Command(code=code, opaque=7, version=version, ext_fields=fields,
                                    serialize_type=serialize_type)))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            data += sock.recv(65536)
    (HERE / name).write_bytes(data)
    print(f"{name}: {len(data)} bytes")


def main(namesrv_json: str, namesrv_binary: str, broker: str, group: str, client_id: str) -> None:
    capture(namesrv_json, 106, {}, 409, "cluster_info.json_header.frame")
    # Asked in the binary layout: 4.9.8 answers in the request's layout.
    capture(namesrv_binary, 106, {}, 409, "cluster_info.binary_header.frame", ROCKETMQ)
    # A client older than 4.9.4 gets fastjson's unquoted numeric keys.
    capture(namesrv_binary, 105, {"topic": "T8"}, 0, "route.unquoted_keys.binary_header.frame",
            ROCKETMQ)
    capture(namesrv_json, 105, {"topic": "T8"}, 409, "route.quoted_keys.json_header.frame")
    capture(broker, 203, {"consumerGroup": group}, 409, "consumer_connections.frame")
    capture(broker, 307, {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"},
            409, "running_info.frame")
    capture(namesrv_json, 105, {"topic": "NoSuchTopic"}, 409, "route.topic_not_exist.frame")


if __name__ == "__main__":
    main(*sys.argv[1:6])
