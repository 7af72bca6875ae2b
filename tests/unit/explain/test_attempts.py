"""explain.attempts: torchrun --max-restarts' attempts told apart; the first failed one leads.

Lines from tests/data/explain/runs/restarts-sigkill and restarts-user-exception (torch 2.13,
torchrun --max-restarts 2 --log-dir --tee 3, gloo on CPU), cut where the test needs it."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.attempts import split
from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.globalranks import apply
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.reader import read_text
from tests.helpers.paths import DATA

RUNS = DATA / "explain" / "runs"
SIGKILL = (RUNS / "restarts-sigkill" / "console.log").read_text().splitlines()
# its attempts in the console: 1-26 (rank 0 lost its peer, the agent SIGTERMed it: "failed
# (exitcode: -15) local_rank: 0"), 27-52 (the same, then "failed (exitcode: -9) local_rank:
# 1"), 53-end (both ranks' connectFullMesh refused, the summary of attempt_2)
FIRST, SECOND = SIGKILL[:26], SIGKILL[26:52]
AGENT = ("E1124 16:51:10.664000 11838 site-packages/torch/distributed/elastic/multiprocessing/"
         "api.py:1002] failed (exitcode: {code}) local_rank: {lr} (pid: 12001) of binary: "
         "/usr/bin/python3.11")


def _split(texts: dict[str, str]):
    records = [r for src, text in texts.items() for r in read_text(src, text)]
    return split(apply(records, texts), texts)


def _lead(lines: list[str]):
    e = explain_texts([("console.log", "\n".join(lines) + "\n")])
    return e, next(p for p in e.problems if not p.consequence_of)


def test_a_console_is_cut_where_the_agent_ended_an_attempt_and_workers_ran_again():
    parts = _split({"console.log": "\n".join(SIGKILL) + "\n"})
    assert parts is not None and parts.first_number == 0
    assert {r.lineno for r in parts.first} == set(range(1, 27))
    assert [k for k, _ in parts.later] == [1, 2]
    assert min(r.lineno for r in parts.later[0][1]) == 27


def test_a_console_without_prefixes_is_cut_where_the_summary_counts_the_attempts():
    # torch 1.13 / no --tee: no worker line is marked; the summary names attempt_2 after
    # the third agent line, so each of the first two ended an attempt
    bare = [line.split("]:", 2)[-1] if line.startswith("[default") else line
            for line in SIGKILL]
    assert not any(line.startswith("[rank") for line in bare)
    parts = _split({"console.log": "\n".join(bare) + "\n"})
    assert parts is not None and [k for k, _ in parts.later] == [1, 2]
    assert max(r.lineno for r in parts.first) == 26
    # near miss: the same lines without the summary's attempt_2 are not cut
    cut = [line for line in bare if "attempt_2" not in line]
    assert _split({"console.log": "\n".join(cut) + "\n"}) is None


def test_near_miss_one_attempt_is_no_restart():
    # the agent's line, then only torchrun's own summary: the job's one attempt ended
    one = (RUNS / "user-exception-console" / "console.log").read_text()
    assert _split({"console.log": one}) is None
    # two agents' lines in one file (two nodes' torchrun in one Slurm output): not told apart
    two = "\n".join([AGENT.format(code=1, lr=0), "[default0]:step 1",
                     AGENT.format(code=1, lr=0).replace(" 11838 ", " 22222 "),
                     "[default0]:step 1", AGENT.format(code=1, lr=0)]) + "\n"
    assert _split({"slurm.out": two}) is None
    # torch 1.13's format names no agent: a worker line after its line may be another
    # node's; only "Worker group FAILED. N/M attempts left; will restart" says a restart
    old = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) " \
        "local_rank: 0 (pid: 27803) of binary: /usr/bin/python"
    assert _split({"slurm.out": f"{old}\n[default0]:step 1\n{old}\n"}) is None
    restart = ("INFO:torch.distributed.elastic.agent.server.api:[default] Worker group "
               "FAILED. 3/3 attempts left; will restart worker group")
    parts = _split({"slurm.out": f"{old}\n{restart}\n[default0]:step 1\n{old}\n"})
    assert parts is not None and [k for k, _ in parts.later] == [1]


def test_the_log_dir_tree_names_each_files_attempt():
    tree = {f"logs/run/attempt_{k}/{lr}/stderr.log": f"[rank{lr}]: step {k}\n"
            for k in (0, 1) for lr in (0, 1)}
    parts = _split(tree)
    assert parts is not None
    assert {r.source for r in parts.first} == {"logs/run/attempt_0/0/stderr.log",
                                               "logs/run/attempt_0/1/stderr.log"}
    assert [k for k, _ in parts.later] == [1]


def test_a_console_trimmed_at_its_start_is_numbered_from_the_summarys_attempt():
    # the summary names attempt_2; one restart is left in the console: it shows 1 and 2
    tail = SIGKILL[26:]
    parts = _split({"console.log": "\n".join(tail) + "\n"})
    assert parts is not None and parts.first_number == 1 and [k for k, _ in parts.later] == [2]


def test_the_agents_line_gets_the_consoles_global_rank():
    records = read_text("c.log", "\n".join(SECOND) + "\n")
    ranks = {r.lineno: r.rank for r in apply(records, {"c.log": "\n".join(SECOND) + "\n"})}
    assert ranks[26] == 1  # "failed (exitcode: -9) local_rank: 1": [default1]:[rank1]: above
    # near miss: another node's console ([default1]:[rank3]:) adds its offset; none: no rank
    node1 = "[default1]:[rank3]: Traceback (most recent call last):\n" + \
        AGENT.format(code=-9, lr=1) + "\n"
    assert {r.lineno: r.rank for r in apply(read_text("n1", node1), {"n1": node1})}[2] == 3
    bare = AGENT.format(code=-9, lr=1) + "\n"
    assert apply(read_text("n", bare), {"n": bare})[0].rank is None


def test_restarts_sigkill_is_the_kill_the_attempts_repeat_with_the_rest_as_consequences():
    ex = explain_inputs(read_inputs([str(RUNS / "restarts-sigkill")], None))
    causes = [p for p in ex.problems if not p.consequence_of]
    assert causes[0].code == "host-out-of-memory" and causes[0].ranks == (1,)
    assert not ex.undetermined and "attempt 1 (restart 1)" in causes[0].observed
    echoes = [p for p in ex.problems if p.consequence_of]
    # attempt 0's lost peer, attempt 2's refused connections: consequences, not causes (one
    # node: the refused loopback address is an earlier attempt's peer, no host name,
    # explain.quietexit.loopback_in_one_node; was hostname-loopback before stop 30's 2nd batch)
    assert any(p.observed.startswith("attempt 0:") for p in echoes)
    assert any(p.observed.startswith("attempt 2:") and p.code == "peer-unreachable"
               for p in echoes)


def test_restarts_user_exception_is_the_first_attempts_keyerror():
    ex = explain_inputs(read_inputs([str(RUNS / "restarts-user-exception")], None))
    causes = [p for p in ex.problems if not p.consequence_of]
    assert causes[0].code == "unexplained" and "KeyError: 'labels'" in causes[0].observed
    assert causes[0].ranks == (1,)
    assert "attempt 1:" in ex.render_text() and "attempt 2:" in ex.render_text()


def test_near_miss_the_first_attempt_alone_abstains():
    # rank 0 lost its peer and was SIGTERMed; how rank 1 ended is not in these lines
    e, lead = _lead(FIRST)
    assert e.undetermined and lead.code == "rank-killed" and "SIGTERM" in lead.observed
    # a restart that shows nothing of its own: still only the first attempt's symptoms
    e, lead = _lead([*FIRST, *SECOND[:5]])
    assert e.undetermined and lead.code == "rank-killed"


def test_near_miss_a_later_attempt_that_fails_otherwise_does_not_decide_the_first():
    # attempt 1's kill lands on local rank 0, the rank that showed the symptom in attempt 0:
    # not the same failure repeated, so attempt 0 stays undetermined
    other = [line.replace("local_rank: 1", "local_rank: 0") for line in SECOND]
    e, lead = _lead([*FIRST, *other])
    assert e.undetermined, lead
    # the real second attempt decides it
    e, lead = _lead([*FIRST, *SECOND])
    assert not e.undetermined and lead.code == "host-out-of-memory" and lead.ranks == (1,)


def test_a_first_attempt_that_shows_no_failure_lets_the_next_one_lead():
    # attempt 0's files hold only progress (its failure's lines were not kept): the first
    # attempt that shows a failure leads, said to be a later one (never "no failure found")
    run = "logs/none_ab12cd34"
    texts = [(f"{run}/attempt_0/{lr}/stdout.log", f"rank {lr}: step 0 loss 0.36\n")
             for lr in (0, 1)]
    texts.append((f"{run}/attempt_1/1/stderr.log",
                  "[rank1]: Traceback (most recent call last):\n"
                  '[rank1]:   File "/x/train.py", line 92, in inject\n'
                  "[rank1]: KeyError: 'labels'\n"))
    e = explain_texts(texts)
    lead = next(p for p in e.problems if not p.consequence_of)
    assert lead.code == "unexplained" and "attempt 1" in lead.observed
    assert "KeyError: 'labels'" in lead.observed
