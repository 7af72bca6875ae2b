"""What the structure of a failed job says that its lines' words do not.

Runs wherever ``ddpcheck explain`` runs. Written from whole logs of real failed jobs
(``bench/explain_real_runs.py``: torch 2.13, gloo, torchrun / mp.spawn), where the peers'
errors (a gloo ``Connection closed by peer``, ``Timed out waiting ... for recv``) are
symptoms that name no cause, and the cause is told by the launcher's structure:

- torchrun's ``Root Cause (first observed failure)`` block (torch/distributed/elastic/
  multiprocessing/errors/__init__.py, ``ChildFailedError.get_first_failure``: the failure
  with the earliest timestamp) names the rank that failed first, and mp.spawn's
  ``-- Process N terminated with the following error:`` (torch/multiprocessing/spawn.py,
  ``ProcessContext.join``) the process it saw fail first. When that rank's own exception is
  one no rule explains (the user's code raised), it is the first failure and the other
  ranks' symptoms follow from it; when that rank was killed by SIGKILL while torchrun ended
  the others with SIGTERM (torch/distributed/elastic/multiprocessing/api.py ``_close``:
  SIGTERM to every remaining worker first, SIGKILL only after its timeout), the SIGKILL came
  from outside torchrun (the OOM killer, a user, the scheduler), not from its teardown.
- whose store failed, the master's or the ``--rdzv-endpoint``'s, is ``stores``'s to say.
- with only the ``--log-dir`` tree, the rank whose error.json has the strictly earliest
  timestamp is the first failure, as torchrun itself chooses it (``globalranks`` gives each
  file its global rank first).
- a rank whose own last line is a step it runs alone (evaluation, saving, tokenising:
  ``timeouts.SOLO_STEP``), which printed no error, while every other rank timed out in a
  collective, was busy alone; the rank torchrun saw fail first is a waiter, not that rank.
- each rank's traceback ends in the torch.distributed call it was in (``distributed_c10d.py
  ... in all_reduce``): ranks that timed out in different collectives ran different ones
  (gloo prints no op in its timeout, ``gloo/transport/tcp/unbound_buffer.cc``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain import (
    kernelasserts,
    noderanks,
    quietexit,
    stores,
    teardown,
    torchreleases,
    tracebacks,
)
from ddpcheck.explain.causality import CAUSE, SYMPTOM, SYMPTOMS, Explained, tier
from ddpcheck.explain.codes import COLLECTIVE_DESYNC, HOST_OOM, UNEXPLAINED
from ddpcheck.explain.failurewords import WAITED
from ddpcheck.explain.families import formation
from ddpcheck.explain.families.timeouts import DONE, solo_step
from ddpcheck.explain.reader import Record, first_failed_rank
from ddpcheck.launcher.spawn.formation import WORLD_NOT_FORMED

# The Root Cause block's "exitcode  : -9 (pid: N)" and the agent's "failed (exitcode: -9)".
SIGKILLED = re.compile(r"exitcode\s*:\s*-9\b|failed \(exitcode: -9\)|"
                       r"process \d+ terminated with signal SIGKILL")
# A worker ended by a signal other than torchrun's own SIGTERM (api.py ``_close``): the
# summary's "exitcode  : -11 (pid: 13318)" (errors/__init__.py), the agent's "failed
# (exitcode: -11)". Recorded with 2.1.2: runs-torch2.1/fresh-sigsegv, "exitcode : -11 ...
# error_file: <N/A> ... Signal 11 (SIGSEGV) received by PID 13318" dated 3 s after the Root
# Cause block's rank 0 (its "Connection closed by peer"), by the 5 s poll.
SIGNALLED = re.compile(r"exitcode\s*:\s*-(?!15\b)\d+\b|failed \(exitcode: -(?!15\b)\d+\)")
# A rank's timeout or lost peer as gloo and the store print them (what a rank that waited
# sees); only such exceptions are compared for the collective each rank was in.
ERRORISH = re.compile(r"Traceback|Error\b|Exception|Killed|exitcode|[Aa]bort", re.I)
PEER_LOST = re.compile(r"Connection closed by peer|Connection reset by peer")
KILLED_CODES = frozenset({HOST_OOM.code, "rank-killed"})
LOADER_KILLED = re.compile(r"DataLoader worker \(pid \d+\) is killed by signal: Killed")

# Lines of torchrun's summary that the reader gives a rank (its Failures block), and
# signals of its teardown: not a rank's own output.
SUMMARY_LINE = re.compile(r"^\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:|"
                          r"Signal 15 \(SIGTERM\)|^\s*\[\d+\]:\s*$|^\s*[-=]{8,}\s*$")


def first_rank(records: Sequence[Record]) -> int | None:
    """The rank the launcher saw fail first: torchrun's Root Cause block, or mp.spawn's
    "-- Process N terminated with the following error:"."""
    rank = first_failed_rank(list(records))
    if rank is not None:
        return rank
    for r in records:
        if m := tracebacks.SPAWNED.match(r.text):
            return int(m["rank"])
    # Only the --log-dir tree: torchrun's own choice, made from the same error.json files
    # (errors/__init__.py get_first_failure: the earliest "timestamp", whole seconds), when
    # one rank's is strictly the earliest.
    first: dict[int, float] = {}
    for r in records:
        if r.source.endswith("error.json") and r.rank is not None and r.time is not None:
            first[r.rank] = min(r.time, first.get(r.rank, r.time))
    if len(first) > 1:
        (t0, r0), (t1, _) = sorted((t, rk) for rk, t in first.items())[:2]
        if t0 < t1:
            return r0
    return _only_rank_not_waiting(records)


def _only_rank_not_waiting(records: Sequence[Record]) -> int | None:
    """When the launcher's order says nothing (no block, or one ``reader.first_failed_rank``
    cannot trust), causality does: a peer is lost or a collective times out only after some
    rank stopped taking part. If every rank that raised raised a lost peer or a timeout
    (``WAITED``) but one rank, which raised something else or was SIGKILLed (not by
    torchrun's teardown), that rank failed first. Recorded with torch 1.13.1 (tests/data/
    explain/runs-torch1.13/user-exception, sigkill), whose Root Cause blocks named rank 0's
    ``Connection closed by peer``."""
    every = tracebacks.job_crashes(records)
    acting = [c for c in every if not WAITED.search(c.exception)]
    if not every or len(acting) == len(every) or any(c.rank is None for c in acting):
        return None  # no process that only waited, or an acting one of unknown rank
    active = {c.rank for c in acting}
    if not any("SIGKILL" in r.text and "closing signal" in r.text for r in records):
        active |= {r.rank for r in records if r.rank is not None and SIGNALLED.search(r.text)}
    return next(iter(active)) if len(active) == 1 else None


def first_in_one_stream(records: Sequence[Record]) -> int | None:
    """Without a launcher's summary: the rank whose exception one shared console printed first,
    when it is no wait and every other rank's exception, later in the same stream, is one.

    Launchers that print no summary of their ranks (Lightning's _SubprocessScriptLauncher,
    lightning/fabric/strategies/launchers/subprocess_script.py 2.6.6, starts rank 1.. with the
    console inherited; a script's own multiprocessing) leave each rank's traceback, prefixed by
    torch's ``[rankN]:``, in one stream, where line order is time order (``causality.before``).
    A rank's own error that is no wait (a KeyError, a disk error) printed before the other
    ranks' lost peers and timeouts is where they come from (runs-wrappers/
    lightning-user-exception: rank 1's KeyError, then rank 0's "Connection closed by peer");
    when the first is itself a wait, or another rank failed otherwise, the log does not say."""
    ranked = [c for c in tracebacks.crashes(records) if c.rank is not None]
    if len({c.rank for c in ranked}) < 2 or len({c.record.source for c in ranked}) > 1:
        return None
    first, *rest = sorted(ranked, key=lambda c: c.record.lineno)
    if WAITED.search(first.exception) or not all(
            c.rank == first.rank or WAITED.search(c.exception) for c in rest):
        return None
    return first.rank


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """Before ordering: the master's store named by its traceback, a dialed name that does
    not resolve, and a collective timeout whose ranks' tracebacks end in different
    torch.distributed calls (a desync)."""
    found = quietexit.loopback_in_one_node(found, records)
    if found and (releases := torchreleases.different_releases(records)) is not None:
        found = [releases, *found]  # two torch releases in one job: its symptoms follow
    found = noderanks.refine(teardown.refine(found, records), records)
    return _busy_alone(_in_init(_desync(stores.refine(found, records), records), records),
                       records)


def _in_init(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A timeout whose waiting ranks' tracebacks all end inside ``init_process_group`` (the
    store wait of ProcessGroupGloo's or the store-based barrier's rendezvous, torch 2.2+:
    ``DistStoreError: wait timeout after Nms, keys: /default_pg/0//cpu//0/1``) is no
    collective: the world never formed (``world-not-formed``, still a symptom): a rank of
    the world never reached init_process_group (a real run: runs/s32-spawn-world-plus-one,
    mp.spawn of 2 processes told world_size 3)."""
    timeouts = [e for e in found if e.problem.code == "collective-timeout"
                and not e.problem.consequence_of]
    if not timeouts:
        return found
    waits = [c for c in tracebacks.crashes(records) if WAITED.search(c.exception)]
    if not waits or any(c.collective != "init_process_group" for c in waits):
        return found
    said = "; ".join(f"{'rank ' + str(c.rank) if c.rank is not None else 'a rank'} in "
                     f"init_process_group: {c.exception[:160]}" for c in waits[:3])
    e = timeouts[0]
    ranks = tuple(sorted({c.rank for c in waits if c.rank is not None}))
    formed = WORLD_NOT_FORMED.problem(
        f"{said} [{waits[0].record.source}:{waits[0].record.lineno}]",
        cause=("the ranks timed out inside init_process_group, waiting in its store for ranks "
               "that never came: a rank of the world was not started or crashed before "
               "init_process_group, or the world size given (WORLD_SIZE, world_size=, "
               "mp.spawn's nprocs) is larger than the processes started"),
        fix=("start exactly world_size ranks (torchrun sets WORLD_SIZE itself: do not also pass "
             "world_size= by hand; with mp.spawn pass nprocs=world_size) and look for an "
             "earlier error of the rank that did not come"),
        ranks=ranks, hosts=e.problem.hosts)
    return [replace(x, problem=formed, grade=SYMPTOM, next_run=formation.NEXT) if x is e else x
            for x in found]


def _busy_alone(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A collective timeout on every rank but one, whose own last line is a solo step and
    which printed no error: that rank was busy alone (rank-zero-only-step-timeout). The same
    for the one rank a monitored barrier names as never arriving (TORCH_DISTRIBUTED_DEBUG=
    DETAIL; a real run here: rank 1 saving a checkpoint alone)."""
    own: dict[int, list[Record]] = {}
    for r in records:
        if r.rank is not None and r.text.strip() and not SUMMARY_LINE.search(r.text):
            own.setdefault(r.rank, []).append(r)
    timeouts = [e for e in found if e.problem.code == "collective-timeout"
                and not e.problem.consequence_of and e.problem.ranks]
    for e in found:
        if e.problem.consequence_of or not e.problem.ranks:
            continue
        if e.problem.code == "collective-timeout" and len(timeouts) == 1:
            waited = set(e.problem.ranks)
            idle = [rk for rk in own if rk not in waited]
            if not waited <= set(own):
                continue
        elif e.problem.code == "rank-never-joined":
            idle = list(e.problem.ranks)
            waited = set(own) - set(idle)
        else:
            continue
        if len(idle) != 1 or not waited:
            continue
        (rank,) = idle
        last = _solo_step(own.get(rank, []))
        if last is None or first_rank(records) == rank:
            continue
        step = f"{last.source}:{last.lineno}: {last.text.strip()[:160]}"
        busy = load_catalogue()["rank-zero-only-step-timeout"].problem(
            f"rank {rank}'s last line: {step} | {e.problem.observed}",
            cause=f"rank {rank} was busy with a step of its own ({last.text.strip()[:120]}) "
                  f"while rank {', '.join(map(str, sorted(waited)))} waited in a collective "
                  "until the process-group timeout; its own lines show no error",
            ranks=(rank,), hosts=_hosts_of(own[rank]))  # where the cause is: the busy rank
        return [replace(x, problem=busy, root=True, grade=CAUSE,
                        evidence=(f"{last.source}:{last.lineno}", *x.evidence)[:4])
                if x is e else x for x in found]
    return found


def _solo_step(lines: Sequence[Record]) -> Record | None:
    """A rank's last own line in some file, when it is a step it runs alone and still under
    way (one that had ended, 100% or saved, says nothing of where it went) and none of its
    lines shows an error."""
    if not lines or any(ERRORISH.search(r.text) for r in lines):
        return None
    lasts: dict[str, Record] = {}
    for r in lines:
        if r.source not in lasts or r.lineno > lasts[r.source].lineno:
            lasts[r.source] = r
    return next((r for r in lasts.values()
                 if solo_step(r.text) and not DONE.search(r.text)), None)


def _hosts_of(lines: Sequence[Record]) -> tuple[str, ...]:
    return tuple(sorted({r.host for r in lines if r.host}))


def _desync(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    timeouts = [e for e in found if e.problem.code == "collective-timeout"
                and not e.problem.consequence_of]
    if not timeouts:
        return found
    ops: dict[int, tracebacks.Crash] = {}
    for c in tracebacks.crashes(records):
        if c.rank is not None and c.collective and WAITED.search(c.exception):
            ops.setdefault(c.rank, c)
    if len({c.collective for c in ops.values()}) < 2:
        return found
    said = ", ".join(f"rank {r} in {c.collective}"
                     + (f" ({c.user_frame})" if c.user_frame else "")
                     for r, c in sorted(ops.items()))
    e = timeouts[0]
    cause = (f"the ranks timed out in different collectives ({said}): a rank skipped, added "
             "or reordered one (a rank-dependent branch)")
    fix = ""
    if any(c.collective == tracebacks.BACKWARD for c in ops.values()):
        # one rank still in a training step's backward while another had left the loop:
        # the ranks ran different numbers of steps (uneven inputs, no Join)
        cause = (f"the ranks timed out in different collectives ({said}): a rank still in a "
                 "training step's gradient all_reduce while another was past it ran more "
                 "steps: uneven inputs (shards of different lengths, no drop_last, a "
                 "rank-dependent break) without the Join context manager")
        fix = ("give every rank the same number of batches (DistributedSampler(..., "
               "drop_last=True), the same dataset length) or wrap the loop in "
               "`with model.join():` (torch.distributed.algorithms.Join) for uneven inputs")
    desync = COLLECTIVE_DESYNC.problem(
        f"{said} | {e.problem.observed}", cause=cause, fix=fix,
        ranks=tuple(sorted(ops)), hosts=e.problem.hosts)
    evidence = tuple(f"{c.record.source}:{c.record.lineno}" for _, c in sorted(ops.items()))
    return [replace(x, problem=desync, root=True, grade=CAUSE,
                    evidence=(*evidence, *x.evidence)[:4]) if x is e else x
            for x in found if x is e or x not in timeouts]


def first_failure(ordered: list[Explained], found: Sequence[Explained],
                  records: Sequence[Record], unclaimed: Sequence[tracebacks.Crash]
                  ) -> list[Explained]:
    """After ordering: when the words leave the root undetermined (symptoms only, or a hint
    that a peer's symptom blocked), the rank the launcher saw fail first decides: its own
    unexplained exception, or its SIGKILL, is the root; everything else follows from it."""
    if not ordered or min(tier(e) for e in found) == 0:
        return ordered  # a cause-grade line stands: the ordering already decided
    lead = next((e for e in ordered if not e.problem.consequence_of), None)
    if lead is None or tier(lead) < 3 and lead.problem.code != "root-cause-ambiguous":
        return ordered
    if (launched := _deepspeed_launcher(found, records)) is not None:
        return launched
    if (quiet := quietexit.quiet_exit(found, records)) is not None:  # sys.exit(N), no trace
        return [quiet, *_echoes(found, quiet.problem.code)]
    rank = first_rank(records)
    if rank is None:
        rank = first_in_one_stream(records)
    if rank is None:
        lone = _lone_crash(unclaimed, records)
        return ordered if lone is None else [lone, *_echoes(found, UNEXPLAINED.code)]
    if left := _peer_left(records, rank):
        return [left, *_echoes(found, left.problem.code)]
    # The first rank's own symptom (a timeout, a lost peer) would make it a victim too.
    if any(rank in e.problem.ranks and (e.problem.code in SYMPTOMS - KILLED_CODES)
           for e in found):
        return ordered
    crash = next((c for c in unclaimed if c.rank == rank), None)
    if crash is not None:
        crash = tracebacks.framed(crash, tracebacks.user_frames(records))
        return [_crash_root(crash, rank, records), *_echoes(found, UNEXPLAINED.code)]
    # its DataLoader worker killed (torch/csrc/DataLoader.cpp: "DataLoader worker (pid N) is
    # killed by signal: Killed.", strsignal of SIGKILL): the worker is the rank's own child,
    # which torchrun's teardown never signals, so that kill came first (a real run:
    # runs/s30-loader-worker-killed, its --log-dir tree alone)
    worker = next((e for e in found if e.problem.code in KILLED_CODES and rank in
                   e.problem.ranks and LOADER_KILLED.search(e.problem.observed)), None)
    if worker is not None:
        return [replace(worker, root=True),
                *_echoes([e for e in found if e is not worker], worker.problem.code)]
    killed = [e for e in found if e.problem.code in KILLED_CODES and rank in e.problem.ranks
              and "SIGKILL" in e.problem.observed]
    if killed and _killed_before_teardown(records, rank):
        root = killed[0]  # its lines also hold the SIGTERMs of the others: name its rank
        rest = [e for e in found if e is not root]
        return [replace(root, problem=root.problem.where(ranks=(rank,))),
                *_echoes(rest, root.problem.code)]
    # another signal (a native crash's SIGSEGV, SIGABRT, SIGBUS) on the first-failed rank:
    # still a symptom (what crashed is not in the log), but it leads the peers' lost peers
    signalled = [e for e in found if e.problem.code == "rank-killed" and rank in e.problem.ranks]
    if signalled and lead.problem.code != "rank-killed":
        root = signalled[0]
        return [root, *_echoes([e for e in found if e is not root], root.problem.code)]
    return ordered


def _lone_crash(unclaimed: Sequence[tracebacks.Crash], records: Sequence[Record]
                ) -> Explained | None:
    """No line gives a rank (torch 1.13 and 2.1 print a worker's traceback without a
    ``[rankN]:`` prefix when torchrun runs without ``--tee``), but of the tracebacks every one
    but one ends in a lost peer or a timeout (``WAITED``): that one, which no rule explains,
    is the process that left first. Recorded with torch 1.13.1 (tests/data/explain/
    runs-torch1.13/user-exception-console): "KeyError: 'labels'" beside "RuntimeError:
    [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer"."""
    every = tracebacks.job_crashes(records)
    if len(every) < 2 or any(c.rank is not None for c in every):
        return None
    active = [c for c in every if not WAITED.search(c.exception)]
    # one exception in several files is one failure (a --log-dir tree holds each worker's
    # stderr.log and its error.json: the same traceback twice)
    if len({c.exception for c in active}) != 1 or not any(
            c.exception == active[0].exception for c in unclaimed):
        return None
    return _crash_root(min(active, key=lambda c: (c.user_frame == "", c.record.order)), None,
                       records)


def _peer_left(records: Sequence[Record], rank: int) -> Explained | None:
    """The first-failed rank lost its peer inside a collective, and torchrun lists no other
    failure ("<NO_OTHER_FAILURES>", errors/__init__.py ``ChildFailedError.format_msg``) and
    had no worker left to stop (no "Sending process N closing signal", api.py ``_close``):
    the other workers had already exited with status 0, before the collective."""
    if not any("<NO_OTHER_FAILURES>" in r.text for r in records) or any(
            "closing signal" in r.text for r in records):
        return None
    crash = next((c for c in tracebacks.crashes(records) if c.rank == rank and c.collective
                  and PEER_LOST.search(c.exception)), None)
    if crash is None:
        return None
    where = f" ({crash.user_frame})" if crash.user_frame else ""
    r = crash.record
    problem = load_catalogue()["rank-never-joined"].problem(
        f"rank {rank} waited in {crash.collective}{where} and its peer closed the "
        f"connection: {crash.exception[:160]} | torchrun: <NO_OTHER_FAILURES>, and no worker "
        "left to stop",
        cause=f"a peer of rank {rank} left before the {crash.collective} rank {rank} waited "
              "in: no other worker of this node failed or was still running, so they had "
              "exited with status 0 (a rank that ran out of data or returned early; on "
              "another node, one that crashed)",
        fix="make every rank run the same number of steps and collectives (an even "
            "DistributedSampler split, drop_last=True, the join() context manager for "
            "uneven inputs); look at the other ranks' last lines",
        hosts=(r.host,) if r.host else ())
    return Explained(problem, r, True, "ddpcheck run --nodes N --stages collectives",
                     (f"{r.source}:{r.lineno}",), CAUSE)


# DeepSpeed's launcher (deepspeed/launcher/launch.py main, 0.19.8): "process 6747 spawned with
# command: [..., '--local_rank=1']" per rank, "Process 6747 exits successfully." for a rank that
# exited 0, and for the first non-zero code it polls (every 1 s) "Killing subprocess N" for
# each rank, then "[...] exits with return code = -9". That code is recorded before its
# teardown (last_return_code, then sigkill_handler), so a -9 there is a SIGKILL from outside the
# launcher (the OOM killer, a user, the scheduler), whatever the peers printed meanwhile. The
# command in that line is NOT the failed rank's: launch.py formats the loop variable `cmd`,
# the last rank it spawned (runs-wrappers/deepspeed-rank-exits-early: rank 0 exited 1, the line
# shows '--local_rank=1'), so no rank is read from it.
DS_SPAWNED = re.compile(r"process (?P<pid>\d+) spawned with command: \[.*"
                        r"'--local_rank=(?P<lr>\d+)'")
DS_SUCCESS = re.compile(r"Process (?P<pid>\d+) exits successfully\.")
DS_KILLED = re.compile(r"\] exits with return code = -9\b")


def _deepspeed_launcher(found: Sequence[Explained], records: Sequence[Record]
                        ) -> list[Explained] | None:
    """What DeepSpeed's launcher lines decide when the words leave the root undetermined: a
    rank that exited 0 while another lost it in a collective never joined that collective
    (runs-wrappers/deepspeed-rank-exits-early); a -9 it recorded is the root
    (deepspeed-sigkill)."""
    spawned = {m["pid"]: int(m["lr"]) for r in records if (m := DS_SPAWNED.search(r.text))}
    if not spawned:
        return None
    done = sorted({spawned[m["pid"]] for r in records if (m := DS_SUCCESS.search(r.text))
                   and m["pid"] in spawned})
    lost = next((c for c in tracebacks.crashes(records) if c.rank is not None and c.collective
                 and c.rank not in done and PEER_LOST.search(c.exception)), None)
    if done and lost is not None:
        r = lost.record
        who = ", ".join(map(str, done))
        problem = load_catalogue()["rank-never-joined"].problem(
            f"local rank {who} exited with status 0 (deepspeed: Process N exits successfully) "
            f"while rank {lost.rank} waited in {lost.collective}: {lost.exception[:160]}",
            cause=f"local rank {who} left before the {lost.collective} rank {lost.rank} waited "
                  "in (a rank that ran out of data or returned early)",
            fix="make every rank run the same number of steps and collectives (an even "
                "DistributedSampler split, drop_last=True, the join() context manager for "
                "uneven inputs); look at the other ranks' last lines",
            ranks=tuple(done), hosts=(r.host,) if r.host else ())
        root = Explained(problem, r, True, "ddpcheck run --nodes N --stages collectives",
                         (f"{r.source}:{r.lineno}",), CAUSE)
        return [root, *_echoes(found, root.problem.code)]
    killed = next((e for e in found if e.problem.code in KILLED_CODES
                   and DS_KILLED.search(e.first.text)), None)
    if killed is None:
        return None
    return [replace(killed, root=True), *_echoes([e for e in found if e is not killed],
                                                 killed.problem.code)]


def _killed_before_teardown(records: Sequence[Record], rank: int) -> bool:
    """The first-failed rank shows exitcode -9 and torchrun ended the others with SIGTERM
    (or there were none left to end): the SIGKILL was not torchrun's."""
    killed = any(SIGKILLED.search(r.text) for r in records
                 if r.rank == rank or r.rank is None)
    return killed and not any("SIGKILL" in r.text and "closing signal" in r.text
                              for r in records)


def _crash_root(crash: tracebacks.Crash, rank: int | None,
                records: Sequence[Record]) -> Explained:
    r = crash.record
    where = f" ({crash.user_frame})" if crash.user_frame else ""
    who = f"rank {rank}" if rank is not None else "one process"
    how = ("the launcher's first observed failure" if rank is not None else
           "every other traceback is a lost peer or a timeout")
    observed = f"{who} failed first ({how}) with {crash.exception[:200]}{where}"
    cause = (f"{who}'s own exception{where}, which no rule names as a distributed "
             "failure: the other ranks' errors (a lost peer, a timeout) follow from it")
    fix = f"fix the exception in {who}'s code{where}; "
    kernel = kernelasserts.first(records, rank) if kernelasserts.DEVICE_ASSERT in \
        crash.exception else None
    if kernel is not None:  # the GPU printed which check failed; the exception does not say
        observed += f"; {kernel.observed()} [{kernel.record.source}:{kernel.record.lineno}]"
        cause = f"{kernel.meaning()}; {cause}"
        fix = kernel.fix(crash.user_frame or "the failing line")
    problem = UNEXPLAINED.problem(observed, cause=cause, fix=fix + UNEXPLAINED.fix,
                                  ranks=(rank,) if rank is not None else (),
                                  hosts=(r.host,) if r.host else ())
    return Explained(problem, r, True, UNEXPLAINED.fix, (f"{r.source}:{r.lineno}",), CAUSE)


def _echoes(rest: Sequence[Explained], cause: str) -> list[Explained]:
    return [Explained(e.problem.where(consequence_of=cause), e.first, e.root, e.next_run,
                      e.evidence, e.grade)
            for e in sorted(rest, key=lambda e: e.first.order)
            if e.problem.code != "root-cause-ambiguous"]
