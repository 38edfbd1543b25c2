"""A small RocketMQ remoting client: one TCP connection per address, requests matched to responses
by `opaque`, a timeout per call, and a new connection after a broken one.

    client = RemotingClient(AclSigner("ak", "sk"))         # or RemotingClient() without ACL
    response = client.call("127.0.0.1:9876", GET_BROKER_CLUSTER_INFO, timeout_s=5)
    response.code, response.body
    client.close()

Failures raise RemotingError subclasses (a timeout, a refused or broken connection, a frame that
does not decode); a response with a non-zero code is returned as it is, for the caller to judge.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import logging
import socket
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from producers.rocketmq.frames import Command, FrameError, decode, encode, split_frames

log = logging.getLogger(__name__)

# What the bridge says it is: what 4.9.8's Java client sends (Version.V4_9_8.ordinal(), seen on the
# wire). A NameServer answers a route in standard JSON only to clients of 4.9.4 and later.
CLIENT_VERSION = 409


class RemotingError(Exception):
    """A call that got no usable response."""

    cause = "remoting_error"


class RemotingTimeout(RemotingError):
    cause = "timeout"


class RemotingConnectError(RemotingError):
    cause = "connect_failed"


class RemotingClosed(RemotingError):
    cause = "connection_closed"


class RemotingFrameError(RemotingError):
    cause = "bad_frame"


@dataclass(frozen=True)
class AclSigner:
    """ACL 1.0 signing as AclClientRPCHook does: HmacSHA1 (base64) of the values of AccessKey
    and every extField, in key order, followed by the body; sent as extFields AccessKey and
    Signature (and SecurityToken when given)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def sign(self, ext_fields: dict[str, str], body: bytes) -> dict[str, str]:
        fields = {**ext_fields, "AccessKey": self.access_key}
        if self.security_token:
            fields["SecurityToken"] = self.security_token
        content = "".join(fields[key] for key in sorted(fields)).encode() + (body or b"")
        digest = hmac.new(self.secret_key.encode(), content, hashlib.sha1).digest()
        return {**fields, "Signature": base64.b64encode(digest).decode()}


class _Connection:
    def __init__(self, address: str, connect_timeout_s: float) -> None:
        host, _, port = address.rpartition(":")
        try:
            self._socket = socket.create_connection((host, int(port)), timeout=connect_timeout_s)
        except (OSError, ValueError) as exc:
            raise RemotingConnectError(f"{address}: {exc}") from exc
        self._socket.settimeout(None)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.address = address
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._read, name=f"remoting-{address}", daemon=True).start()

    def send(self, command: Command) -> Future:
        future: Future = Future()
        with self._lock:
            if self.closed:
                raise RemotingClosed(f"{self.address}: connection closed")
            self._pending[command.opaque] = future
        try:
            self._socket.sendall(encode(command))
        except OSError as exc:
            self.close(RemotingClosed(f"{self.address}: {exc}"))
            raise RemotingClosed(f"{self.address}: {exc}") from exc
        return future

    def forget(self, opaque: int) -> None:
        with self._lock:
            self._pending.pop(opaque, None)

    def close(self, error: RemotingError | None = None) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pending, self._pending = self._pending, {}
        try:
            self._socket.close()
        except OSError:
            pass
        for future in pending.values():
            future.set_exception(error or RemotingClosed(f"{self.address}: connection closed"))

    def _read(self) -> None:
        buffer = bytearray()
        try:
            while True:
                chunk = self._socket.recv(65536)
                if not chunk:
                    raise RemotingClosed(f"{self.address}: closed by the peer")
                buffer += chunk
                for frame in split_frames(buffer):
                    self._dispatch(decode(frame))
        except FrameError as exc:
            self.close(RemotingFrameError(f"{self.address}: {exc}"))
        except RemotingError as exc:
            self.close(exc)
        except OSError as exc:
            self.close(RemotingClosed(f"{self.address}: {exc}"))

    def _dispatch(self, command: Command) -> None:
        if not command.is_response:
            return  # a server's own request (we register as nothing, so none is expected)
        with self._lock:
            future = self._pending.pop(command.opaque, None)
        if future is not None:
            future.set_result(command)


class RemotingClient:
    def __init__(self, signer: AclSigner | None = None, connect_timeout_s: float = 3.0) -> None:
        self._signer = signer
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self._connecting: dict[str, threading.Lock] = {}
        self._opaques = itertools.count(1)

    def call(self, address: str, code: int, ext_fields: dict[str, str] | None = None,
             body: bytes = b"", timeout_s: float = 5.0) -> Command:
        fields = {k: str(v) for k, v in (ext_fields or {}).items() if v is not None}
        if self._signer is not None:
            fields = self._signer.sign(fields, body)
        request = Command(code=code, opaque=next(self._opaques), version=CLIENT_VERSION,
                          ext_fields=fields, body=body)
        connection = self._connection(address)
        future = connection.send(request)
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout as exc:
            connection.forget(request.opaque)
            raise RemotingTimeout(f"{address}: no response to code {code} within {timeout_s} s") from exc

    def close(self) -> None:
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()

    def _connection(self, address: str) -> _Connection:
        with self._lock:
            connecting = self._connecting.setdefault(address, threading.Lock())
        with connecting:  # one connect per address at a time; other addresses go on
            with self._lock:
                connection = self._connections.get(address)
            if connection is None or connection.closed:
                connection = _Connection(address, self._connect_timeout_s)
                with self._lock:
                    self._connections[address] = connection
            return connection
