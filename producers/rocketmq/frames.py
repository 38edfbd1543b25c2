"""RocketMQ remoting frames, encoded and decoded as the Java RemotingCommand does. Pure: no I/O.

A frame on the wire (RemotingCommand.encode / NettyDecoder):

    int32 length            everything after this word: 4 + header length + body length
    int32 header word       high byte: serialize type (0 JSON, 1 ROCKETMQ); low 24 bits: header length
    header                  JSON (RemotingSerializable) or the ROCKETMQ binary layout below
    body                    the rest (JSON, fastjson-flavoured: see producers/rocketmq/fastjson.py)

The ROCKETMQ binary header (RocketMQSerializable): int16 code, int8 language, int16 version,
int32 opaque, int32 flag, int32 remark length + remark, int32 extFields length + the fields as
(int16 key length, key, int32 value length, value) pairs. All big-endian.

A response carries the server's own serialize type whatever the request used, so both are
decoded always.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

JSON, ROCKETMQ = 0, 1
RESPONSE_FLAG = 1      # flag bit 0: 1 = response
ONEWAY_FLAG = 2        # flag bit 1: no response expected
SUCCESS = 0
# RemotingCommand.getCode() of a few responses the bridge tells apart.
SYSTEM_ERROR, SYSTEM_BUSY, REQUEST_CODE_NOT_SUPPORTED = 1, 2, 3
CONSUMER_NOT_ONLINE = 206
TOPIC_NOT_EXIST = 17
NO_PERMISSION = 16

# LanguageCode, RocketMQ 5's (its byte in the binary header, its name in the JSON one and in a
# consumer connection's listing): the one list of the clients' SDKs here.
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
             "PHP", "OMS", "RUST", "NODE_JS")
MAX_FRAME_BYTES = 16 * 1024 * 1024   # NettyDecoder's FRAME_MAX_LENGTH default


class FrameError(ValueError):
    """Bytes that are not a well-formed remoting frame."""


@dataclass(frozen=True)
class Command:
    code: int
    opaque: int = 0
    flag: int = 0
    version: int = 0
    language: str = "PYTHON"
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)


def encode(command: Command) -> bytes:
    """One whole frame, length word included."""
    if command.serialize_type == ROCKETMQ:
        header = _binary_header(command)
    else:
        header = json.dumps(_json_header(command), separators=(",", ":")).encode()
    if len(header) >= 1 << 24:
        raise FrameError("header too long")
    header_word = (command.serialize_type << 24) | len(header)
    return struct.pack(">ii", 4 + len(header) + len(command.body), header_word) + header + command.body


def decode(frame: bytes) -> Command:
    """A frame without its leading length word (what NettyDecoder hands on)."""
    if len(frame) < 4:
        raise FrameError(f"frame of {len(frame)} bytes has no header word")
    (header_word,) = struct.unpack_from(">i", frame)
    serialize_type, header_length = (header_word >> 24) & 0xFF, header_word & 0xFFFFFF
    if 4 + header_length > len(frame):
        raise FrameError(f"header of {header_length} bytes in a frame of {len(frame)}")
    header, body = frame[4:4 + header_length], frame[4 + header_length:]
    if serialize_type == JSON:
        return _from_json_header(header, body)
    if serialize_type == ROCKETMQ:
        return _from_binary_header(header, body)
    raise FrameError(f"unknown serialize type {serialize_type}")


def split_frames(buffer: bytearray) -> list[bytes]:
    """Take every complete frame off the front of `buffer` (each without its length word)."""
    frames = []
    while len(buffer) >= 4:
        (length,) = struct.unpack_from(">i", buffer)
        if length < 4 or length > MAX_FRAME_BYTES:
            raise FrameError(f"frame length {length} out of range")
        if len(buffer) < 4 + length:
            break
        frames.append(bytes(buffer[4:4 + length]))
        del buffer[:4 + length]
    return frames


def _json_header(command: Command) -> dict:
    header = {"code": command.code, "language": command.language, "version": command.version,
              "opaque": command.opaque, "flag": command.flag,
              "serializeTypeCurrentRPC": "JSON"}
    if command.remark is not None:
        header["remark"] = command.remark
    if command.ext_fields:
        header["extFields"] = dict(command.ext_fields)
    return header


def _from_json_header(header: bytes, body: bytes) -> Command:
    try:
        data = json.loads(header)
    except ValueError as exc:
        raise FrameError(f"JSON header: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("code"), int):
        raise FrameError("JSON header without an integer code")
    ext = data.get("extFields") or {}
    return Command(code=data["code"], opaque=int(data.get("opaque", 0)),
                   flag=int(data.get("flag", 0)), version=int(data.get("version", 0)),
                   language=str(data.get("language", "JAVA")), remark=data.get("remark"),
                   ext_fields={str(k): str(v) for k, v in ext.items()}, body=body,
                   serialize_type=JSON)


def _binary_header(command: Command) -> bytes:
    remark = (command.remark or "").encode()
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                   for k, v in ((k.encode(), v.encode()) for k, v in command.ext_fields.items()))
    language = LANGUAGES.index(command.language) if command.language in LANGUAGES else 7
    return (struct.pack(">hbhii", command.code, language, command.version, command.opaque,
                        command.flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(ext)) + ext)


def _from_binary_header(header: bytes, body: bytes) -> Command:
    try:
        code, language, version, opaque, flag = struct.unpack_from(">hbhii", header)
        at = 13
        remark, at = _sized(header, at, ">i")
        ext_bytes, at = _sized(header, at, ">i")
        ext, pos = {}, 0
        while pos < len(ext_bytes):
            key, pos = _sized(ext_bytes, pos, ">h")
            value, pos = _sized(ext_bytes, pos, ">i")
            ext[key.decode()] = value.decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"binary header: {exc}") from exc
    return Command(code=code, opaque=opaque, flag=flag, version=version,
                   language=LANGUAGES[language] if 0 <= language < len(LANGUAGES) else "OTHER",
                   remark=remark.decode() or None, ext_fields=ext, body=body,
                   serialize_type=ROCKETMQ)


def _sized(data: bytes, at: int, prefix: str) -> tuple[bytes, int]:
    (length,) = struct.unpack_from(prefix, data, at)
    at += struct.calcsize(prefix)
    if length < 0 or at + length > len(data):
        raise struct.error(f"length {length} at {at} past the end ({len(data)})")
    return data[at:at + length], at + length
