"""A team sharing memory as it would: one PostgreSQL hub, three agents each with a local clone.

Each member (tests/support/team_member.py, a process of its own) commits 50 times to its
clone while the others do, writing ids of its own, ids every member writes and
a claim no other member agrees with, and syncs now and then: pull, settle
conflicts by the team's rule (the higher Lamport stamp wins), push, and start
over when another member pushed first. At the end every store has one history.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from support import script, script_env
from support.team_member import SHARED, SYNC_EVERY, settle

from mnemosyne import Conflict, Node, Repo

MEMBERS = 3
COMMITS = 50


def run_team(hub: str, tmp_path: Path) -> list[dict]:
    """Start the members, let each clone the hub, then start them at once; their reports."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            script("team_member", hub, str(tmp_path / f"w{w}.mnemo"), str(w), str(COMMITS), str(go)),
            env=script_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(MEMBERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.communicate(timeout=10)[1]
        go.write_text("go")
        reports = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_three_agents_share_one_hub_and_end_with_one_history(pg_url, tmp_path):
    started = time.monotonic()
    with Repo.init(pg_url) as hub:
        hub.commit([Node(id="team/charter", content="remember together")], message="start", author="lead")
    reports = run_team(pg_url, tmp_path)
    # Every member's pushes landed. How many were refused first depends on timing
    # (typically 10 to 40 a run), so only their outcome is asserted; conflicts are
    # certain: the second member to land merged the first one's shared/k0 with its own.
    assert all(r["stats"]["pushes"] == COMMITS // SYNC_EVERY for r in reports), reports
    assert sum(r["stats"]["conflicts"] for r in reports) >= 1, reports

    with Repo.open(pg_url) as hub:
        tip = hub.resolve("main").id
        # What each member wrote of its own is there as written; each shared id holds
        # the value the rule picks among every value written to it.
        expected = {"team/charter": "remember together"}
        for report in reports:
            expected.update(report["private"])
        for k in range(SHARED):
            written = [value for r in reports for node_id, value in r["shared"] if node_id == f"shared/k{k}"]
            expected[f"shared/k{k}"] = max(written)
        nodes = {n.id: n.content for n in hub.nodes() if n.kind != "claim"}
        assert nodes == expected
        assert {n.id for n in hub.nodes(prefix="claims/")} == {f"claims/w{w}/city" for w in range(MEMBERS)}
        # Every commit a member made is in the hub's history, merges aside.
        log = list(hub.log())
        for w in range(MEMBERS):
            mine = [c for c in log if c.author == f"w{w}" and len(c.parents) == 1]
            assert len(mine) == COMMITS
        # The three claims disagree pairwise; merges recorded each disagreement and none is settled.
        open_ = hub.contradictions()
        pairs = {frozenset(node.id for node in c.claims) for c in open_}
        assert pairs == {
            frozenset({f"claims/w{a}/city", f"claims/w{b}/city"}) for a in range(MEMBERS) for b in range(a)
        }
        assert hub.fsck().ok

    # A final pull brings every clone to the hub's tip: the last to push is already
    # there, the others fast-forward. Each then reads what the hub reads.
    for w in range(MEMBERS):
        with Repo.open(tmp_path / f"w{w}.mnemo") as clone:
            merged = clone.pull(author=f"w{w}").merge
            assert merged.fast_forward or merged.up_to_date
            assert clone.resolve("main").id == tip == clone.resolve("origin/main").id
            assert {n.id: n.content for n in clone.nodes() if n.kind != "claim"} == expected
            assert len(clone.contradictions()) == len(open_)
            assert clone.fsck().ok
    assert time.monotonic() - started < 30


def test_the_conflict_rule_picks_the_higher_stamp_whichever_side_merges():
    older, newer = (Node(id="shared/k0", content=value) for value in ("000005 w2 i09", "000007 w1 i03"))
    assert settle([Conflict("shared/k0", "add/add", None, newer, older)]) == {"shared/k0": "ours"}
    assert settle([Conflict("shared/k0", "add/add", None, older, newer)]) == {"shared/k0": "theirs"}
