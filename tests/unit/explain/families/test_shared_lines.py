"""Lines that several causes print are symptoms (explain abstains), unless a line beside them
tells the causes apart; the near miss that names one cause stays confident. The audit of the
rendezvous, network, device, Slurm and worker families (docs/explain.md)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.families import PATTERNS
from tests.unit.explain.families.helpers import first_cause


def verdict(*lines: str) -> tuple[str, bool]:
    """(first cause, whether explain abstains)."""
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    causes = [p.code for p in e.problems if not p.consequence_of]
    return (causes[0] if causes else "none"), e.undetermined


def test_busy_or_unavailable_gpu_is_a_hint_of_ranks_sharing_it_that_a_cause_outranks():
    # cudaErrorDevicesUnavailable: in a distributed job most often a second rank of this job
    # on the same exclusive-mode GPU; another job's or a stuck process prints it too: a hint
    busy = "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"
    assert verdict(busy) == ("duplicate-device", False)
    e = explain_texts([("job.log", busy + "\n")])
    assert e.found[0].grade == "hint"
    assert first_cause(busy, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB") == "cuda-out-of-memory"
    # near miss: NCCL's own duplicate check names the cause
    assert verdict("NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device "
                   "1a000") == ("duplicate-device", False)


def test_gloo_refused_at_a_loopback_address_is_a_hint_like_127_0_1_1():
    # "SO_ERROR: ..., remote=[...]" is gloo's connect loop (tcp/helpers.cc), dialling the
    # address the peer advertised: 127.0.0.1 there is a peer whose gloo bound to loopback (or,
    # on one node, a peer that exited): a hint, the same grade as Debian's 127.0.1.1
    for addr in ("127.0.0.1", "127.0.1.1", "127.0.0.2"):
        line = f"timed out connecting: SO_ERROR: Connection refused, remote=[{addr}]:29500"
        assert verdict(line) == ("hostname-loopback", False)
        assert explain_texts([("job.log", line + "\n")]).found[0].grade == "hint"
    # near miss: a routable peer address names no loopback
    assert verdict("timed out connecting: SO_ERROR: Connection refused, "
                   "remote=[10.0.3.7]:29500")[0] != "hostname-loopback"
    # near miss: c10d's store connect (socket.cpp) to localhost is a store host that exited
    assert verdict("[E socket.cpp:1019] [c10d] The client socket has failed to connect to "
                   "[localhost]:29500 (errno: 111 - Connection refused).")[0] != \
        "hostname-loopback"


def test_c10d_cannot_resolve_the_host_it_dials_a_symptom():
    # socket.cpp's connect path: MASTER_ADDR may be this node, another node or a typo
    assert verdict("[E socket.cpp:860] [c10d] The IPv4 network addresses of (master-0, 29500) "
                   "cannot be retrieved (gai error: -2 - Name or service not known).") == \
        ("hostname-unresolvable", True)
    # the listen path (SocketListenOp::tryListen: getaddrinfo(nullptr, port, AI_PASSIVE))
    # looks up no name at all: a symptom too since stop 28 (was read as this node's name)
    assert verdict("RuntimeError: The local IPv4 network addresses cannot be retrieved (gai "
                   "error: -2 - Name or service not known).") == ("hostname-unresolvable", True)


def test_errno_99_on_a_wildcard_is_ipv6_turned_off_and_a_bare_errno_99_a_symptom():
    assert first_cause("[W socket.cpp:464] [c10d] The server socket has failed to bind to "
                       "[::]:29500 (errno: 99 - Cannot assign requested address).") == "none"
    assert verdict("OSError: [Errno 99] Cannot assign requested address") == \
        ("master-addr-not-rank0-node", True)
    # near miss: a named address this machine does not have
    assert verdict("RuntimeError: The server socket has failed to bind to 10.0.0.5:29500 "
                   "(errno: 99 - Cannot assign requested address).") == \
        ("master-addr-not-rank0-node", False)


C10D_FRAME = ('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/'
              'c10d_rendezvous_backend.py", line 174, in _create_tcp_store')
C10D_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 60s "
                "while trying to connect to (gpu-a01, 29400).")


def test_a_wait_on_the_nodes_own_name_after_a_failed_bind_is_the_port_held():
    # _create_tcp_store: is_host matched, TCPStore(is_master=True) failed on errno 98, the
    # retry as a client timed out: not an endpoint that went unrecognised
    code = first_cause("[W socket.cpp:426] [c10d] The server socket has failed to bind to "
                       "[::]:29400 (errno: 98 - Address already in use).",
                       C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a01")
    assert code != "endpoint-not-recognised"
    # near miss: without the bind warning it is the endpoint not recognised
    assert first_cause(C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a01") == \
        "endpoint-not-recognised"


def test_gloo_hostname_lookup_is_never_read_as_an_interface():
    line = ("RuntimeError: [enforce fail at ../gloo/transport/tcp/device.cc:127] rp != nullptr. "
            "Unable to find address for: dgx-1.ai")
    no_hostname_rules = [p for p in PATTERNS if p.code != "hostname-unresolvable"]
    e = explain_texts([("job.log", line)], patterns=no_hostname_rules)
    assert e.problems[0].code != "socket-ifname-invalid" and e.undetermined
    # near miss: the interface lookup (ifa != nullptr) is GLOO_SOCKET_IFNAME
    assert first_cause("RuntimeError: [enforce fail at ../gloo/transport/tcp/device.cc:83] "
                       "ifa != nullptr. Unable to find address for: eth9") == \
        "socket-ifname-invalid"


def test_a_steps_gres_error_is_not_the_jobs():
    step = ("srun: error: Unable to create step for job 42: Invalid generic resource (gres) "
            "specification")
    no_step_rules = [p for p in PATTERNS if p.code != "slurm-step-rejected"]
    e = explain_texts([("job.log", step)], patterns=no_step_rules)
    assert e.problems[0].code != "slurm-job-rejected"
    assert first_cause(step) == "slurm-step-rejected"
    assert first_cause("sbatch: error: Invalid generic resource (gres) specification") == \
        "slurm-job-rejected"


def test_a_workers_sigbus_is_a_hint_that_a_cause_beside_it_outranks():
    sigbus = "Signal 7 (SIGBUS) received by PID 5343"
    e = explain_texts([("job.log", sigbus + "\n")])
    assert e.found[0].grade == "hint" and e.problems[0].code == "dev-shm-too-small"
    # printed first in the same file, a hint still gives way to a line that names its cause
    assert first_cause(sigbus, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB") == "cuda-out-of-memory"
    # DataLoader's own message only says "might be caused by insufficient shared memory" (a
    # file mapped and truncated under a worker is a SIGBUS too): also a hint, of /dev/shm
    e = explain_texts([("job.log", "ERROR: Unexpected bus error encountered in worker. This "
                        "might be caused by insufficient shared memory (shm)\n")])
    assert e.found[0].grade == "hint" and e.problems[0].code == "dev-shm-too-small"


def test_a_batch_script_without_srun_explains_waits_not_the_scripts_own_exception():
    script = ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "python train.py")
    crash = ("Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
             "KeyError: 'labels'")
    assert first_cause(*script, *crash) == "unexplained"
    # near miss: the wait for the peers that were never started
    assert first_cause(*script, "torch.distributed.elastic.rendezvous.api."
                       "RendezvousTimeoutError") == "slurm-without-srun"


def test_the_agents_exit_line_cut_short_is_a_hint_as_the_whole_line_is():
    cut = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank"
    whole = cut + ": 3 (pid: 5343) of binary: python"
    for line in (cut, whole):
        e = explain_texts([("job.log", line + "\n")])
        assert e.found[0].grade == "hint" and e.problems[0].code == "host-out-of-memory"
    # so a failure printed before it that no rule reads leaves the root cause open
    assert first_cause("RuntimeError: CUDA error: an illegal memory access was encountered",
                       cut) == "root-cause-ambiguous"


LOOPBACK_WARNING = ("[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a "
                    "(local) address. Using the loopback address as fallback. Manually set the "
                    "network interface to bind to with GLOO_SOCKET_IFNAME.")


def test_gloos_loopback_fallback_explains_gloo_pairs_not_the_store_connection():
    # createDefaultDevice runs when ProcessGroupGloo is built, after the store connected:
    # the store's address is MASTER_ADDR, which the fallback does not touch
    code, open_ = verdict(LOOPBACK_WARNING, "torch.distributed.DistNetworkError: The client "
                          "socket has failed to connect to [master-0]:29500 (errno: 111 - "
                          "Connection refused).")
    assert code != "hostname-loopback" and open_
    # near miss: gloo's own pair connection after the fallback is its consequence
    assert first_cause(LOOPBACK_WARNING, "RuntimeError: Gloo connectFullMesh failed with "
                       "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error") == \
        "hostname-loopback"


def test_ncclss_interface_choice_does_not_explain_a_store_timeout():
    docker = "h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>"
    code, open_ = verdict(docker, "torch.distributed.DistNetworkError: The client socket has "
                          "timed out after 60s while trying to connect to (master-0, 29500).")
    assert code != "nccl-wrong-interface" and open_
