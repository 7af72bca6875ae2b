"""An in-process c10d-like store that wakes only the threads waiting on the key that was set.

Test and bench side only (bench/world_scale.py simulates 8,192 ranks as threads). c10d's
HashStore wakes every waiting thread on every set, so thousands of simulated ranks spend
the run waking each other; here each key that someone waits on has its own Event, made on
the first wait and dropped once set. Same API as the c10d store calls ddpcheck makes (set,
get, add, check, wait, multi_get, multi_set, compare_set, delete_key, num_keys); a wait past
its timeout raises RuntimeError, as c10d's DistStoreError (a RuntimeError) does.

With a ``baton`` (a lock each simulated rank holds while it runs and gives up only while it
waits here), one thread runs Python at a time and the others sleep in the kernel instead of
fighting for the GIL: 1,024 threads woken at once otherwise spend most of the run in futex
calls (measured: 104 s, 82 s of it system time, for 1,024 ranks).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import timedelta


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class FastStore:
    """A dict of bytes and one Event per awaited key; thread-safe."""

    def __init__(self, baton: threading.Lock | None = None) -> None:
        self.baton = baton  # held by the one simulated rank that runs; released while waiting
        self._data: dict[str, bytes] = {}
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def _put(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[key] = value
            event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def set(self, key: str, value: str | bytes) -> None:
        self._put(key, _bytes(value))

    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        for key, value in zip(keys, values):
            self._put(key, _bytes(value))

    def get(self, key: str) -> bytes:
        self.wait([key])
        return self._data[key]

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        self.wait(keys)
        return [self._data[k] for k in keys]

    def check(self, keys: Sequence[str]) -> bool:
        return all(k in self._data for k in keys)

    def wait(self, keys: Sequence[str], timeout: timedelta | None = None) -> None:
        end = None if timeout is None else time.monotonic() + timeout.total_seconds()
        for key in keys:
            with self._lock:
                if key in self._data:
                    continue
                event = self._events.setdefault(key, threading.Event())
            left = None if end is None else max(end - time.monotonic(), 0.0)
            if self.baton is not None:
                self.baton.release()
            try:
                arrived = event.wait(left)
            finally:
                if self.baton is not None:
                    self.baton.acquire()
            if not arrived:
                raise RuntimeError(f"wait timed out for key {key!r}")

    def add(self, key: str, amount: int) -> int:
        with self._lock:
            value = int(self._data.get(key, b"0")) + amount
            self._data[key] = str(value).encode()
            event = self._events.pop(key, None)
        if event is not None:
            event.set()
        return value

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        with self._lock:
            now = self._data.get(key)
            if (now is None and expected == "") or now == _bytes(expected):
                self._data[key] = _bytes(desired)
                return _bytes(desired)
            return now if now is not None else _bytes(expected)

    def delete_key(self, key: str) -> bool:
        with self._lock:
            return self._data.pop(key, None) is not None

    def num_keys(self) -> int:
        return len(self._data)


class GreenStore(FastStore):
    """The same store for simulated ranks run as greenlets in one OS thread (no GIL fight,
    no kernel hand-off per wake-up): a wait on a missing key parks the rank until a set.

    ``run(calls)`` runs each call as a rank and returns when all have finished. A wait that
    can never be satisfied (every rank parked) raises RuntimeError in the parked ranks, as a
    timed-out c10d wait does, so the real code's deadline paths run.
    """

    def __init__(self) -> None:
        super().__init__()
        import greenlet  # test/bench only (the [test] extra)

        self._greenlet = greenlet
        self._hub = greenlet.getcurrent()
        self._ready: deque = deque()
        self._parked: dict[str, list] = {}

    def _put(self, key: str, value: bytes) -> None:
        self._data[key] = value
        self._ready.extend(self._parked.pop(key, ()))

    def add(self, key: str, amount: int) -> int:
        value = int(self._data.get(key, b"0")) + amount
        self._put(key, str(value).encode())
        return value

    def wait(self, keys: Sequence[str], timeout: timedelta | None = None) -> None:
        for key in keys:
            while key not in self._data:
                self._parked.setdefault(key, []).append(self._greenlet.getcurrent())
                self._hub.switch()

    def run(self, calls: Sequence[Callable[[], None]]) -> None:
        self._ready.extend(self._greenlet.greenlet(c, parent=self._hub) for c in calls)
        while self._ready or self._parked:
            if not self._ready:  # every rank waits for a key nobody will set: time them out
                stuck = [g for waiting in self._parked.values() for g in waiting]
                self._parked.clear()
                for g in stuck:
                    g.throw(RuntimeError("wait timed out: no rank can set the key"))
                continue
            g = self._ready.popleft()
            if not g.dead:
                g.switch()
