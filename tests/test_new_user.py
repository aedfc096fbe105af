"""What a new user tripped over, each pinned by a test that failed before its fix.

A fresh store that cannot branch, revisions and times that the API took in one
spelling only, a retried write that failed, an empty id silently replaced, a
branch name no revision could name, a read-only directory that could not be
inspected, damage below the objects that escaped the error tree, recall that
missed the obvious, and the smaller rough edges of the command line.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from support.cli_harness import CliStore, assert_error, invoke
from support.clocks import T0, Clock

from mnemosyne import Commit, CorruptObject, InvalidInput, Node, NotFound, Repo, Store, to_json
from mnemosyne.recall.postings import Postings, rows_of
from mnemosyne.recall.recall_index import RecallIndex
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.usefixtures("clean_cli_env")
SCOPE = b"\x00\x00\x00\x00"


# -- a fresh store can branch ---------------------------------------------------------


def test_a_fresh_store_branches_and_the_first_commit_on_either_branch_starts_it(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        assert repo.branch("run-1") is None  # no commits yet: nothing to start at
        with pytest.raises(NotFound, match="'main' has no commits yet"):
            repo.resolve("HEAD")
        repo.switch("run-1")
        first = repo.commit([Node(id="a", content="on run-1")])
        assert first.created and first.parents == ()
        assert repo.branches() == ["run-1"]  # main has still no commits
        repo.switch("main")
        second = repo.commit([Node(id="a", content="on main")])
        assert second.parents == () and second.id != first.id
        assert [n.content for n in repo.nodes(at="run-1")] == ["on run-1"]
    with Repo.init(tmp_path / "orphan", clock=Clock()) as repo:
        assert repo.branch("dev", orphan=True) is None  # from a fresh store too
        repo.switch("dev")
        repo.switch("main")  # main stays a branch to come back to
        assert repo.commit([Node(id="a", content=1)], branch="main").parents == ()
        assert repo.commit([Node(id="b", content=2)], branch="dev").parents == ()
    store = CliStore(tmp_path / "cli")
    created = store.ok("branch", "run-2")
    assert created == "Created branch run-2 (no commits yet: its first commit starts it)\n"
    store.put({"id": "x", "content": 1}, branch="run-2")
    assert [b["name"] for b in store.lines("branch")] == ["run-2"]


def test_a_branch_with_no_commits_can_be_reset_and_deleted(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        repo.branch("later")
        made = repo.commit([Node(id="a", content=1)])
        assert repo.reset("later", made).id == made.id  # the reset starts it
        assert repo.resolve("later").id == made.id
        repo.switch("later")
        repo.switch("main")
        repo.branch("empty-one", at=None)  # from main, which has a commit now
        assert repo.delete_branch("empty-one") is not None


# -- a Commit and RFC 3339 text wherever a revision or a time is taken -----------------


def test_a_commit_object_is_taken_wherever_a_revision_is(tmp_path: Path) -> None:
    clock = Clock()
    with Repo.init(tmp_path / "s", clock=clock) as repo:
        c1 = repo.commit([Node(id="a", content="one\n")], message="one")
        c2 = repo.commit([Node(id="a", content="one\ntwo\n")], message="two")
        head = repo.resolve("HEAD")
        assert head.id == c2.id and type(head) is Commit
        assert repo.get("a", at=c1).content == "one\n"
        assert [c.id for c in repo.log(at=c1)] == [c1.id]
        assert kinds(repo.diff(c1, head)) == [("modified", "a")]
        assert repo.history("a", at=c1)[0].hash == repo.get("a", at=c1).hash
        assert repo.blame("a", at=head).lines[1].commit == c2.id
        assert repo.is_ancestor(c1, head) and not repo.is_ancestor(head, c1)
        assert repo.branch("from-c1", at=c1).id == c1.id
        assert repo.reset("from-c1", head).id == c2.id
        found = repo.bisect(lambda c: "two" in repo.get("a", at=c).content, c1, head)
        assert found.id == c2.id
        with Repo.in_memory() as other:
            stranger = other.commit([Node(id="z", content=0)])
        with pytest.raises(NotFound):
            repo.get("a", at=stranger)  # a commit of another store is not found here
        with pytest.raises(InvalidInput, match="text or a Commit"):
            repo.get("a", at=42)  # type: ignore[arg-type]


def kinds(diff: object) -> list[tuple[str, str]]:
    """The ids of a diff by kind."""
    return [(k, c.id) for k in ("added", "removed", "modified") for c in getattr(diff, k)]


def test_as_of_and_valid_at_take_rfc3339_text_with_the_clis_errors(tmp_path: Path) -> None:
    clock = Clock(start=T0, step=timedelta(hours=1))
    with Repo.init(tmp_path / "s", clock=clock) as repo:
        first = repo.commit([Node(id="a", content=1)])
        repo.commit([Node(id="a", content=2)])
        text = first.record_time.isoformat().replace("+00:00", "Z")
        assert repo.get("a", as_of=text).content == 1
        assert repo.get("a", as_of=first.record_time).content == 1
        assert [c.id for c in repo.log(as_of=text)] == [first.id]
        assert repo.facts("anyone", valid_at="2026-06-01") == []
        with pytest.raises(InvalidInput, match=r"as_of: 'yesterday' is not an RFC 3339 time"):
            repo.get("a", as_of="yesterday")
        with pytest.raises(InvalidInput, match="as_of: time '2026-06-01T10:00' has no timezone"):
            repo.get("a", as_of="2026-06-01T10:00")
        with pytest.raises(InvalidInput, match="valid_at"):
            repo.facts("x", valid_at="2026-13-01")
    store = CliStore(tmp_path / "cli")
    assert_error(store.run("show", "a", "--as-of", "yesterday"), 2, "is not an RFC 3339 time")


# -- names that no revision could name -------------------------------------------------


def test_a_branch_name_with_refs_heads_is_refused_and_refs_heads_names_the_branch(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    store.put({"id": "a", "content": 1})
    assert_error(store.run("branch", "refs/heads/x"), 2, "not a valid branch name")
    assert_error(store.run("branch", "refs"), 2, "not a valid branch name")
    store.ok("branch", "x")
    named = (("log", "refs/heads/x"), ("show", "a", "--at", "refs/heads/x"), ("diff", "refs/heads/x", "x"))
    for command in named:
        assert store.run(*command).exit_code == 0, command
    assert store.doc("merge", "refs/heads/x")["up_to_date"] is True
    with Repo.open(tmp_path / "s") as repo:
        with pytest.raises(InvalidInput):
            repo.branch("refs/heads/y")


# -- the store's file damaged below the objects ---------------------------------------

_DAMAGE_SCRIPT = textwrap.dedent(
    """
    import json, random, shutil, sys, tempfile
    from pathlib import Path
    from typer.testing import CliRunner
    from mnemo_cli.app import app

    source, seeds = Path(sys.argv[1]), int(sys.argv[2])
    runner = CliRunner()
    size = (source / "data.mdb").stat().st_size
    out = []
    for seed in range(seeds):
        rng = random.Random(seed)
        copy = Path(tempfile.mkdtemp()) / "s"
        shutil.copytree(source, copy)
        data = bytearray((copy / "data.mdb").read_bytes())
        # Most runs damage pages past the two meta pages; every fifth a meta page too.
        low = 0 if seed % 5 == 0 else 8192
        for _ in range(rng.choice([1, 4, 16, 64])):
            at = rng.randrange(low, size)
            data[at] ^= 1 << rng.randrange(8)
        (copy / "data.mdb").write_bytes(bytes(data))
        for command in (["log"], ["fsck"], ["show", "notes/3"], ["search", "apple"], ["export", "-"]):
            result = runner.invoke(app, ["--repo", str(copy), *command], env={"MNEMO_EMBEDDER": "none"})
            out.append({
                "seed": seed,
                "command": command[0],
                "code": result.exit_code,
                "stderr": result.stderr,
                "exception": type(result.exception).__name__ if result.exception else None,
            })
        shutil.rmtree(copy.parent, ignore_errors=True)
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_damage_below_the_objects_is_corrupt_object_or_a_problem_never_an_unexpected_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s"
    with Repo.init(path, clock=Clock()) as repo:
        for k in range(40):
            repo.commit([Node(id=f"notes/{k}", content=f"apple {k} " + "filler " * 40)])
        repo.search("apple")  # the recall index exists too
    done = subprocess.run(
        [sys.executable, "-c", _DAMAGE_SCRIPT, str(path), "40"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)
    assert len(results) == 40 * 5
    for found in results:
        where = (found["seed"], found["command"])
        assert found["exception"] in (None, "SystemExit"), (where, found)
        assert found["code"] in (0, 1, 3, 5), (where, found)
        assert "Traceback" not in found["stderr"] and "unexpected" not in found["stderr"], (where, found)
        if found["code"] == 5:
            assert "damaged" in found["stderr"] or "corrupt" in found["stderr"], (where, found)
    # The damage is seen: some runs report it.
    assert any(r["code"] == 5 or (r["command"] == "fsck" and r["code"] == 1) for r in results)


def test_a_damaged_meta_page_is_called_damaged_and_a_junk_file_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "s"
    Repo.init(path).close()
    data = bytearray((path / "data.mdb").read_bytes())
    data[16:20] = b"\x00\x00\x00\x00"  # the first meta page's magic
    (path / "data.mdb").write_bytes(bytes(data))
    store = CliStore(path)
    result = store.run("log")
    assert_error(result, 5, "damaged")
    assert "restore" in result.stderr
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "data.mdb").write_bytes(b"this is not a store")
    assert_error(invoke("init", str(junk)), 2, "holds a data.mdb that is not a Mnemosyne store")


def test_fsck_reports_a_damaged_recall_record_that_search_would_trip_over(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        repo.commit([Node(id="notes/a", content="apple pie")])
        repo.search("apple")
        with repo.kv.read() as txn:
            number, _, _ = Postings(SCOPE).document(txn, bytes.fromhex(repo.get("notes/a").hash))
        key = SCOPE + b"r" + number.to_bytes(4, "big")
        repo.kv.transact(lambda t: t.put(Space.RECALL, key, bytes(32) + bytes(8) + b"\xff\xfe"))
        report = repo.fsck()
        assert not report.ok
        assert any("search index is damaged" in p.message for p in report.problems), report.problems
    with Repo.open(tmp_path / "s", readonly=True) as fresh:  # nothing of the index remembered
        with pytest.raises(CorruptObject, match="reindex"):
            fresh.search("apple", mode="lexical")
    with Repo.open(tmp_path / "s", clock=Clock()) as repo:
        repo.reindex()
        assert repo.fsck().ok
        assert [h.id for h in repo.search("apple", mode="lexical")] == ["notes/a"]


# -- fsck names exactly the object whose bytes changed ---------------------------------


def test_fsck_names_exactly_an_object_whose_bytes_are_another_objects_valid_encoding(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        repo.commit([Node(id="a", content="first"), Node(id="b", content="second")])
        a, b = repo.get("a"), repo.get("b")
        other = repo.kv
        with other.read() as txn:
            b_bytes = txn.get(Space.OBJECTS, SCOPE + bytes.fromhex(b.hash))
        # a's key now holds b's bytes: they decode, they are a valid node, only the hash tells.
        other.transact(lambda t: t.put(Space.OBJECTS, SCOPE + bytes.fromhex(a.hash), b_bytes))
        problems = repo.fsck().problems
        assert [(p.kind, p.object) for p in problems if p.kind == "corrupt"] == [("corrupt", a.hash)]
        with pytest.raises(CorruptObject):
            repo.get("a")


def test_fsck_names_exactly_an_object_with_a_bit_flipped_in_a_text_value(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        repo.commit([Node(id="a", content="the quick brown fox"), Node(id="b", content="jumps")])
        a = repo.get("a")
        key = SCOPE + bytes.fromhex(a.hash)
        with repo.kv.read() as txn:
            data = bytearray(txn.get(Space.OBJECTS, key))
        at = bytes(data).index(b"quick")
        data[at] ^= 0x20  # 'q' becomes 'Q': still valid UTF-8, still a valid node
        repo.kv.transact(lambda t: t.put(Space.OBJECTS, key, bytes(data)))
        problems = [p for p in repo.fsck().problems if p.kind == "corrupt"]
        assert [(p.object, p.message) for p in problems] == [(a.hash, "bytes do not match the hash")]


def test_erasure_after_a_search_leaves_no_recall_key_or_posting_naming_the_version(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock(), embedder="hash") as repo:
        repo.commit([Node(id="s/1", content="zebrafish secret"), Node(id="s/2", content="apple secret")])
        assert repo.search("zebrafish")  # indexed now: postings, document records, a vector
        erased = repo.get("s/1")
        oid = bytes.fromhex(erased.hash)
        index = RecallIndex(SCOPE)
        with repo.kv.read() as txn:
            number = index.postings.document(txn, oid)[0]
        repo.forget("s/1", "asked")
        with repo.kv.read() as txn:
            for key, value in txn.scan(Space.RECALL, SCOPE):
                assert oid not in key and oid not in value, key
            for _, segment in index.postings.every_segment(txn):
                assert number not in rows_of(segment)[:, 0].tolist()
            assert index.postings.document(txn, oid) is None
        assert repo.search("zebrafish", mode="lexical") == []
        assert all(h.id != "s/1" for h in repo.search("zebrafish"))


# -- recall finds the obvious ----------------------------------------------------------


def test_the_words_of_an_id_are_found_and_json_content_reads_in_a_context(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        repo.commit(
            [
                Node(id="users/mira/prefs/language", content="French"),
                Node(id="users/mira/home_city", content={"value": 7, "since": 2021}),
                Node(id="users/tom/prefs/language", content="English"),
            ]
        )
        hits = [h.id for h in repo.search("what language does mira prefer", mode="lexical")]
        assert hits[0] == "users/mira/prefs/language"
        lines = repo.context("mira home city").render().splitlines()
        assert lines and all(line.split("] ", 1)[1].strip() for line in lines)  # no empty line
        assert any('"since":2021' in line for line in lines)


@pytest.mark.default_embedder
def test_a_new_store_recalls_by_meaning_out_of_the_box(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        assert repo.config("embedder") == "auto"
        assert repo.embedder() is not None and repo.embedder().model_id.startswith("all-MiniLM")
        repo.commit(
            [
                Node(id="users/mira/prefs/language", content="French"),
                Node(id="users/mira/address", content="Rua Augusta 12, Lisbon"),
                Node(id="users/mira/pets", content="a cat called Tofu"),
            ]
        )
        assert repo.search("what language does mira prefer", k=1)[0].id == "users/mira/prefs/language"
        hits = repo.search("where does mira live", k=1, mode="semantic")
        assert hits[0].id == "users/mira/address"
        assert repo.context("where does mira live", budget_tokens=40).items


# -- the command line's rough edges ----------------------------------------------------


def test_log_takes_limit_beside_max_count(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    for k in range(3):
        store.put({"id": "a", "content": k})
    assert len(store.lines("log", "--limit", "2")) == 2
    assert len(store.lines("log", "-n", "1")) == 1


@pytest.mark.slow
def test_a_closed_pipe_ends_mnemo_quietly(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    for k in range(300):
        store.put({"id": f"n/{k}", "content": k})
    env = {**os.environ, "MNEMO_DIR": str(store.path)}
    done = subprocess.run(
        f"{sys.executable} -m mnemo_cli log | head -1", shell=True, capture_output=True, text=True, env=env
    )
    assert done.stdout.startswith("commit ")
    assert done.stderr == ""
    piped = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys; "
         "p = subprocess.Popen([sys.executable, '-m', 'mnemo_cli', 'log'], stdout=subprocess.PIPE); "
         "p.stdout.readline(); p.stdout.close(); sys.exit(p.wait())"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert "Traceback" not in piped.stderr and "error" not in piped.stderr


def test_human_output_escapes_nul_and_other_control_characters(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    store.put({"id": "a", "content": "one\u0000two\u001b[31mthree\ttab"})
    shown = store.ok("show", "a")
    assert "\x00" not in shown and "\x1b" not in shown
    assert "one\\u0000two\\u001b[31mthree\ttab" in shown
    assert store.doc("show", "a")["content"] == "one\u0000two\u001b[31mthree\ttab"  # JSON keeps it exact


def test_init_creates_missing_parents_and_refuses_junk(tmp_path: Path) -> None:
    deep = tmp_path / "not" / "yet" / "there" / "s"
    result = invoke("init", str(deep))
    assert result.exit_code == 0, result.output
    assert (deep / "data.mdb").is_file()
    blocked = tmp_path / "file"
    blocked.write_text("a file")
    assert_error(invoke("init", str(blocked / "s")), 2, "cannot create")


def test_a_hash_in_node_json_is_checked_against_the_node(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    store.put({"id": "a", "content": "right"})
    shown = store.doc("show", "a")
    again = store.doc("commit", "-m", "again", input=json.dumps(shown))
    assert again["created"] is False  # the same node, hash and all: nothing to commit
    shown["content"] = "changed"
    assert_error(store.run("commit", "-m", "x", input=json.dumps(shown)), 2, "does not match the node")
    no_id = {"content": "x", "hash": "ab" * 32}
    assert_error(store.run("commit", "-m", "x", input=json.dumps(no_id)), 2, "give the id too")


def test_forgetting_an_erased_id_again_says_so(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    store.put({"id": "a", "content": "secret"})
    store.ok("forget", "a", "--reason", "asked", "--author", "dpo")
    again = store.result("forget", "a", "--reason", "asked again")
    assert again.stdout == ""
    assert "already erased:" in again.stderr and "by dpo: asked" in again.stderr
    report = store.doc("forget", "a", "--reason", "asked again")
    assert report["redactions"] == [] and report["already_erased"][0]["reason"] == "asked"


def test_a_revision_past_the_root_says_how_far_it_got(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s")
    store.put({"id": "a", "content": 1})
    store.put({"id": "a", "content": 2})
    assert_error(store.run("log", "HEAD~99"), 3, "has only 1 first-parent ancestor, not 99")
    assert_error(store.run("log", "HEAD^2"), 3, "has 1 parent, not a parent number 2")


def test_the_json_of_every_result_reads_back(tmp_path: Path) -> None:
    """One JSON form: what the CLI prints is what from_json reads back into the same result."""
    from mnemosyne import Blame, Diff, Fact, ForgetReport, MergeResult, Version, from_json

    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        c1 = repo.commit([Node(id="a", content={"k": 1}), Node(id="b", content="x")])
        repo.branch("side")
        repo.commit([Node(id="a", content={"k": 2})], branch="side")
        repo.commit([Node(id="a", content={"k": 1, "j": 3})])
        merged = repo.merge("side")
        samples = [
            (repo.history("a"), list[Version]),
            (repo.blame("a"), Blame),
            (repo.diff(c1, "HEAD"), Diff),
            (merged, MergeResult),
            (repo.forget("b", "asked"), ForgetReport),
            (repo.timeline("s", "p"), list[Fact]),
        ]
        for value, kind in samples:
            assert from_json(to_json(value), kind) == value, kind
    store = CliStore(tmp_path / "cli")
    store.put({"id": "a", "content": 1})
    (line,) = store.run("history", "a", as_json=True).stdout.splitlines()
    assert from_json(line, Version).node == Node(id="a", content=1)


_READ_ONLY_CHECKS = textwrap.dedent(
    """
    import json, subprocess, sys
    from mnemosyne import InvalidInput, Node, Repo

    path = sys.argv[1]
    out = {}
    for name, command in {
        "log": ["log"], "show": ["show", "a"], "fsck": ["fsck"], "history": ["history", "a"],
        "search": ["search", "readable"], "export": ["export", "-"], "commit": ["commit", "-m", "x", "-"],
    }.items():
        done = subprocess.run(
            [sys.executable, "-m", "mnemo_cli", "--repo", path, *command],
            input=b'{"id": "b", "content": 1}', capture_output=True,
        )
        out[name] = [done.returncode, done.stderr.decode(), len(done.stdout)]
    with Repo.open(path, readonly=True) as repo:
        out["get"] = repo.get("a").content
        out["fsck_ok"] = repo.fsck().ok
        try:
            repo.commit([Node(id="b", content=1)])
        except InvalidInput as exc:
            out["write"] = str(exc)
    try:
        Repo.open(path)
    except InvalidInput as exc:
        out["open_for_writing"] = str(exc)
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_a_store_on_a_read_only_medium_or_directory_can_be_inspected(tmp_path: Path) -> None:
    """Every reading command works; a write is InvalidInput (exit 2), one line, nothing written.

    As root (CI) the store is seen through a read-only bind mount in a private mount
    namespace, so not even root may write there; otherwise its directory is made
    read-only to this user.
    """
    source = tmp_path / "s"
    with Repo.init(source) as repo:
        repo.commit([Node(id="a", content="readable")], message="first")
    env = {**{k: v for k, v in os.environ.items() if k != "MNEMO_DIR"}, "MNEMO_EMBEDDER": "none"}
    script = tmp_path / "checks.py"
    script.write_text(_READ_ONLY_CHECKS)
    if os.geteuid() == 0:
        target = tmp_path / "medium"
        target.mkdir()
        shell = (
            f"mount --bind {source} {target} && mount -o remount,ro,bind {target} && "
            f"exec {sys.executable} {script} {target}"
        )
        done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, env=env)
    else:
        for item in [source, *source.iterdir()]:
            item.chmod(0o555 if item.is_dir() else 0o444)
        try:
            done = subprocess.run(
                [sys.executable, str(script), str(source)], capture_output=True, text=True, env=env
            )
        finally:
            for item in [source, *source.iterdir()]:
                item.chmod(0o755 if item.is_dir() else 0o644)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    for name in ("log", "show", "fsck", "history", "search", "export"):
        code, stderr, printed = found[name]
        assert code == 0 and printed > 0 and "error" not in stderr, (name, found[name])
    code, stderr, _ = found["commit"]
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "read" in stderr, found["commit"]
    assert found["get"] == "readable" and found["fsck_ok"] is True
    assert "read-only" in found["write"]
    assert "open it read-only" in found["open_for_writing"]
    with Repo.open(source) as repo:
        assert [c.message for c in repo.log()] == ["first"]  # nothing was written


def test_the_deprecated_revision_keywords_still_work_and_warn(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        made = repo.commit([Node(id="a", content=1)])
        with pytest.warns(DeprecationWarning, match="ref= is deprecated"):
            assert [c.id for c in repo.log(ref="main")] == [made.id]
        with pytest.warns(DeprecationWarning):
            assert repo.history("a", ref="main")[0].status == "current"
        with pytest.warns(DeprecationWarning, match="start= is deprecated"):
            assert repo.branch("b", start="main").id == made.id
        with pytest.raises(InvalidInput, match="give at= alone"):
            repo.log(ref="main", at="main")


def test_store_rules_hold_for_every_handle(tmp_path: Path) -> None:
    with Store.init(tmp_path / "s") as store:
        store.create_tenant("acme")
        acme = Repo.open(store, tenant="acme")
        with pytest.raises(InvalidInput, match="default tenant cannot be dropped"):
            acme.drop_tenant("default")
        with pytest.raises(InvalidInput, match="default tenant cannot be dropped"):
            store.drop_tenant("default")
        with pytest.raises(InvalidInput, match="already exists"):
            store.create_tenant("acme")
        with pytest.raises(InvalidInput, match="unknown embedder"):
            store.config("embedder", "bogus")
        assert store.tenants() == ["acme", "default"]
        assert store.drop_tenant("acme") > 0
        with pytest.raises(NotFound):
            acme.log()
    # A URL is never a directory: PostgreSQL's open a server (none listens here), others are refused.
    with pytest.raises(NotFound, match="cannot reach"):
        Store.open("postgresql://127.0.0.1:1/db")
    with pytest.raises(NotFound, match="cannot reach"):
        Repo.init("postgresql://127.0.0.1:1/db")
    with pytest.raises(InvalidInput, match="sqlite:// locations are not supported"):
        Repo.init("sqlite://localhost/db")
    assert not Path("postgresql:").exists() and not Path("sqlite:").exists()


@pytest.mark.parametrize("seed", range(3))
def test_compaction_keeps_every_live_record(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with Repo.init(tmp_path / "s", clock=Clock()) as repo:
        for _k in range(60):
            repo.commit([Node(id=f"n/{rng.randrange(30)}", content="x" * rng.randrange(1, 5000))])
        repo.search("x")
        before = {space: list(_scan(repo, space)) for space in Space}
        report = repo.gc(grace=timedelta(0), compact=True)
        assert report.compacted
        assert {space: list(_scan(repo, space)) for space in Space} == before
        assert repo.fsck().ok


def _scan(repo: Repo, space: Space) -> list[tuple[bytes, bytes]]:
    with repo.kv.read() as txn:
        return [(bytes(k), bytes(v)) for k, v in txn.scan(space, b"")]
