"""Real payloads between two nodes, both ways, under a deadline: does bulk data get through?

Runs in the launcher of every node of a multi-node run, during the peer probes
(:mod:`ddpcheck.cluster.peerprobe`): the prober's side is :func:`exchange`, the target's side
is :func:`serve`, run by the peer-probe listener for every connection it accepts. A TCP
handshake and small messages pass a path that drops large frames (jumbo frames on the hosts,
a switch or bridge that passes 1500 bytes, and no ICMP "fragmentation needed" from a layer-2
hop): gloo and NCCL then connect, and their first large message never arrives. So each
probe moves payloads of growing sizes (SIZES: 1 KiB, 64 KiB, 2 MiB) to the target and back;
a small one that arrives while a large one stalls is the signature of an MTU mismatch on
the path (:mod:`ddpcheck.cluster.pathjudge` judges every node's results).

Protocol, per round: 8 bytes ``b"DDPB"`` + size (uint32, big-endian), then ``size`` bytes;
the target answers with ``size`` bytes once all have arrived. A connection that closes
without a header is a connect-only probe. Sizes above MAX_SIZE are refused (the listener
trusts whoever reaches it, as the rendezvous store does: docs/trust.md).
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import asdict, dataclass
from typing import Any

MAGIC = b"DDPB"
HEADER = struct.Struct(">4sI")
SIZES = (1 << 10, 64 << 10, 2 << 20)  # small: below any MTU; large: many full frames
MAX_SIZE = 8 << 20
SERVE_TIMEOUT = 15.0  # a served connection ends after this long, whatever the peer does
CHUNK = 256 << 10


@dataclass(frozen=True)
class BulkResult:
    """One prober's exchange with one target: what arrived, what stalled, and where."""

    outcome: str  # "ok", "stalled" (the deadline passed mid-transfer), "error"
    largest_ok: int = 0  # bytes: the largest payload that went both ways
    failed_size: int = 0  # the payload that did not (0 when ok)
    sent: int = 0  # of failed_size: bytes the prober handed to its kernel
    received: int = 0  # of failed_size: bytes of the answer that came back
    elapsed: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BulkResult:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def exchange(address: str, port: int, deadline: float, source: str | None = None,
             sizes: tuple[int, ...] = SIZES) -> BulkResult:
    """Send each payload to address:port and read it back, all before ``deadline``."""
    start = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    largest, size, sent, got = 0, 0, 0, 0
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if source:
            sock.bind((source, 0))
        sock.settimeout(_left(deadline))
        sock.connect((address, port))
        for size in sizes:
            sent = got = 0
            sock.settimeout(_left(deadline))
            sock.sendall(HEADER.pack(MAGIC, size))
            payload = memoryview(bytes(size))
            while sent < size:  # in chunks, so a stall says how far the data got
                sock.settimeout(_left(deadline))
                sent += sock.send(payload[sent:sent + CHUNK])
            got = _drain(sock, size, deadline)
            largest = size
        return BulkResult("ok", largest, elapsed=_since(start))
    except socket.timeout:
        return BulkResult("stalled", largest, size, sent, got, _since(start))
    except OSError as exc:
        return BulkResult("error", largest, size, sent, got, _since(start),
                          f"{type(exc).__name__}: {exc}"[:160])
    finally:
        sock.close()


def _drain(sock: socket.socket, size: int, deadline: float) -> int:
    buf = bytearray(min(size, CHUNK))
    got = 0
    while got < size:
        sock.settimeout(_left(deadline))
        n = sock.recv_into(buf, min(len(buf), size - got))
        if not n:
            raise ConnectionResetError("the peer closed the connection mid-transfer")
        got += n
    return got


def serve(conn: socket.socket) -> int:
    """The target's side of :func:`exchange`: echo every round's size back, then close.

    Returns the number of rounds answered (0: a connect-only probe)."""
    deadline = time.monotonic() + SERVE_TIMEOUT
    rounds = 0
    try:
        while True:
            head = _read_exactly(conn, HEADER.size, deadline)
            if head is None:
                return rounds  # connect-only probe, or the prober is done
            magic, size = HEADER.unpack(head)
            if magic != MAGIC or size > MAX_SIZE:
                return rounds
            _drain(conn, size, deadline)
            conn.settimeout(_left(deadline))
            conn.sendall(bytes(size))
            rounds += 1
    except OSError:
        return rounds
    finally:
        conn.close()


def _read_exactly(conn: socket.socket, n: int, deadline: float) -> bytes | None:
    data = b""
    while len(data) < n:
        conn.settimeout(_left(deadline))
        part = conn.recv(n - len(data))
        if not part:
            return None
        data += part
    return data


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("deadline passed")
    return left


def _since(start: float) -> float:
    return round(time.monotonic() - start, 3)
