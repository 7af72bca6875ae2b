"""A c10d store wrapper that counts operations per client: the proof of O(N) store costs.

Test and bench side only. Wrap a real store (``torch.distributed.HashStore`` in process, or
a ``TCPStore``), hand each simulated node or rank its own view with :meth:`client`, drive the
real code through the views, then read the tallies:

    >>> store = CountingStore(dist.HashStore())
    >>> node = store.client("node7")       # same API as a c10d store
    >>> board.publish(node, card)
    >>> store.ops_of("node7"), store.total(), store.per_client()

``ops`` counts calls (one round trip each on a TCPStore), ``keys`` counts the keys they
touched (a multi_get of N keys is 1 op, N keys), ``bytes`` the values moved. The lead can
drive agreement and the final gather through it the same way (one client per rank).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any


class CountingStore:
    """The shared tallies and the real store; call :meth:`client` for a counting view."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.ops: dict[str, Counter[str]] = defaultdict(Counter)
        self.keys: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.read: Counter[str] = Counter()  # bytes of values read (get, multi_get) only
        self._lock = threading.Lock()  # many threads count at once (bench/world_scale.py)

    def client(self, name: str) -> StoreView:
        return StoreView(self, name)

    def count(self, who: str, op: str, keys: int = 1, nbytes: int = 0, read: int = 0) -> None:
        with self._lock:
            self.ops[who][op] += 1
            self.keys[who] += keys
            self.bytes[who] += nbytes
            self.read[who] += read

    def ops_of(self, who: str) -> int:
        return sum(self.ops[who].values())

    def total(self) -> int:
        return sum(self.ops_of(w) for w in self.ops)

    def per_client(self) -> dict[str, int]:
        return {w: self.ops_of(w) for w in self.ops}

    def reset(self) -> None:
        self.ops.clear()
        self.keys.clear()
        self.bytes.clear()
        self.read.clear()


class StoreView:
    """One client's view: the c10d store API, each call counted under ``name``."""

    def __init__(self, owner: CountingStore, name: str) -> None:
        self.owner, self.name, self.s = owner, name, owner.store

    def _n(self, op: str, keys: int = 1, nbytes: int = 0, read: int = 0) -> None:
        self.owner.count(self.name, op, keys, nbytes, read)

    def set(self, key: str, value: str | bytes) -> None:
        self._n("set", 1, len(value))
        self.s.set(key, value)

    def get(self, key: str) -> bytes:
        value = self.s.get(key)
        self._n("get", 1, len(value), len(value))
        return value

    def add(self, key: str, amount: int) -> int:
        self._n("add")
        return int(self.s.add(key, amount))

    def check(self, keys: Sequence[str]) -> bool:
        self._n("check", len(keys))
        return bool(self.s.check(list(keys)))

    def wait(self, keys: Sequence[str], timeout: timedelta | None = None) -> None:
        self._n("wait", len(keys))
        if timeout is None:
            self.s.wait(list(keys))
        else:
            self.s.wait(list(keys), timeout)

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        values = self.s.multi_get(list(keys))
        size = sum(len(v) for v in values)
        self._n("multi_get", len(keys), size, size)
        return values

    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        self._n("multi_set", len(keys), sum(len(v) for v in values))
        self.s.multi_set(list(keys), list(values))

    def compare_set(self, key: str, expected: str, desired: str) -> bytes:
        self._n("compare_set")
        return self.s.compare_set(key, expected, desired)

    def delete_key(self, key: str) -> bool:
        self._n("delete_key")
        return bool(self.s.delete_key(key))

    def num_keys(self) -> int:
        self._n("num_keys", 0)
        return int(self.s.num_keys())
