"""What ``ddpcheck explain`` is given, as users have it: files, directories, gzip, stdin, dumps.

Runs on the user's machine. Each path may be a log (one per rank or node, Slurm ``.out`` /
``.err``, torchrun ``--log-dir`` trees), a directory (walked in name order), a gzip file
(by its magic bytes, whatever its name), ``-`` for stdin, or a torch Flight Recorder dump
(a pickle or its JSON), which becomes a ``RankTrace`` instead of text. Bad input raises
``UsageError`` with one line; an empty input is bad input.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from ddpcheck.explain.flightrec import RankTrace, looks_like_dump, read_dump
from ddpcheck.parsing import UsageError

MAX_BYTES = 256 * 1024 * 1024  # a log larger than this is cut to its last part
MAX_FILES = 10_000  # a directory walk stops here (a job's log tree, not a file system)
GZIP_MAGIC = b"\x1f\x8b"
SKIPPED_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".so", ".png", ".jpg")


@dataclass(frozen=True)
class Inputs:
    """Logs as (name, text), and the Flight Recorder traces found among the paths."""

    logs: tuple[tuple[str, str], ...]
    traces: tuple[RankTrace, ...] = ()


def read_inputs(paths: Sequence[str], stdin: TextIO | None) -> Inputs:
    """Every path (or stdin when there is none); raise UsageError on bad input."""
    logs: list[tuple[str, str]] = []
    traces: list[RankTrace] = []
    for p in paths or ["-"]:
        for name, data in _expand(p, stdin):
            trace = read_dump(name, data) if looks_like_dump(data) else None
            if trace is not None:
                traces.append(trace)
            elif b"\x00" not in data[:1024]:  # text, not some binary left in a log dir
                logs.append((name, data.decode("utf-8", errors="replace")))
    if not traces and not any(text.strip() for _, text in logs):
        raise UsageError("the input is empty: nothing to explain (no text log and no Flight "
                         "Recorder dump in " + ", ".join(paths or ["stdin"]) + ")")
    return Inputs(tuple(logs), tuple(traces))


def _expand(p: str, stdin: TextIO | None) -> Iterator[tuple[str, bytes]]:
    if p == "-":
        if stdin is None or stdin.isatty():
            raise UsageError("no LOG given and stdin is a terminal: pass a log file "
                             "or pipe one in (ddpcheck explain job.out)")
        buf: BinaryIO | None = getattr(stdin, "buffer", None)
        data = buf.read() if buf is not None else stdin.read().encode("utf-8")
        yield "<stdin>", _gunzip("<stdin>", data)
        return
    path = Path(p)
    if path.is_dir():
        files = sorted(f for f in _walk(path) if not f.name.endswith(SKIPPED_SUFFIXES))
        for f in files[:MAX_FILES]:
            yield str(f), _read(str(f))
        return
    yield p, _read(p)


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, _, names in os.walk(root):
        for n in names:
            if not n.startswith("."):
                yield Path(dirpath) / n


def _read(p: str) -> bytes:
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(2)
            if head == GZIP_MAGIC:
                fh.seek(0)
                return _gunzip(p, fh.read())
            fh.seek(max(0, size - MAX_BYTES))
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {p}: {exc.strerror or exc}") from None


def _gunzip(name: str, data: bytes) -> bytes:
    """Decompress; a gzip cut short (a job killed while writing) keeps what was written."""
    if not data.startswith(GZIP_MAGIC):
        return data
    out = bytearray()
    while data.startswith(GZIP_MAGIC):  # concatenated members (appended logs)
        inflater = zlib.decompressobj(wbits=31)
        try:
            out += inflater.decompress(data)
        except zlib.error as exc:
            if not out:
                raise UsageError(f"cannot read {name}: not a valid gzip file ({exc})") from None
            break
        del out[:-MAX_BYTES]
        data = inflater.unused_data
    return bytes(out)
