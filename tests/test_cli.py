"""The ``mnemo`` command line, in-process through Typer's CliRunner.

Covers every command, the JSON forms of the results, exit codes and error
messages. ``test_cli_process.py`` runs the real executable.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mnemo_cli.app import app, main
from mnemo_cli.exits import exit_code
from support.cli_harness import CliStore, assert_error, invoke
from support.components import unavailable

import mnemosyne

pytestmark = pytest.mark.usefixtures("clean_cli_env")

NODE_KEYS = ["id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash"]
PROVENANCE_KEYS = ["agent_step", "observation", "tool_call", "source"]
COMMIT_KEYS = ["id", "tree", "parents", "record_time", "author", "message", "meta", "verified"]
COMMIT_RESULT_KEYS = [*COMMIT_KEYS, "put_ids", "modified_ids", "deleted_ids", "created"]
VERSION_KEYS = [
    *["id", "hash", "node", "commit", "status", "ended_by", "superseded_by", "redaction", "verified"]
]
BLAME_KEYS = ["id", "hash", "node", "commit", "lines", "redacted", "redaction", "verified"]
CHANGE_KEYS = ["id", "old", "new", "old_hash", "new_hash", "redacted"]
HEX64 = re.compile(r"[0-9a-f]{64}")
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


Store = CliStore


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "agent.mnemo")


# -- init and finding the store -------------------------------------------------


def test_init_creates_a_store_and_refuses_a_second(tmp_path: Path) -> None:
    result = invoke("init", str(tmp_path / "s"))
    assert result.exit_code == 0
    assert "Initialized empty Mnemosyne store" in result.stdout
    assert (tmp_path / "s" / "data.mdb").is_file()
    assert_error(invoke("init", str(tmp_path / "s")), 2, "already exists")


def test_init_json_shape(tmp_path: Path) -> None:
    result = invoke("--json", "init", str(tmp_path / "s"))
    assert json.loads(result.stdout) == {
        "path": str((tmp_path / "s").resolve()),
        "tenant": "default",
        "created_store": True,
    }


def test_init_defaults_to_dot_mnemo_and_commands_find_it_upward(tmp_path: Path, monkeypatch) -> None:
    assert invoke("init").exit_code == 0
    assert (tmp_path / ".mnemo" / "data.mdb").is_file()
    deeper = tmp_path / "a" / "b"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    result = invoke("commit", "-m", "found it", input='{"id": "k", "content": "v"}')
    assert result.exit_code == 0, result.output
    assert invoke("show", "k").stdout.rstrip().endswith("v")


def test_mnemo_dir_names_the_store(tmp_path: Path, monkeypatch) -> None:
    Store(tmp_path / "elsewhere")
    monkeypatch.setenv("MNEMO_DIR", str(tmp_path / "elsewhere"))
    assert invoke("commit", "-m", "x", input='{"id": "k", "content": 1}').exit_code == 0
    assert [n["id"] for n in json.loads("[" + invoke("--json", "ls").stdout.strip() + "]")] == ["k"]


def test_no_store_anywhere_is_not_found(tmp_path: Path) -> None:
    if any((folder / ".mnemo").is_dir() for folder in (tmp_path, *tmp_path.parents)):
        unavailable("a .mnemo directory above the temporary directory hides the case")
    assert_error(invoke("log"), 3, "no store found")


def test_missing_store_at_repo_is_not_found(tmp_path: Path) -> None:
    assert_error(invoke("--repo", str(tmp_path / "nothing"), "log"), 3, "no store at")


def test_tenants_are_separate_keyspaces(store: Store) -> None:
    result = invoke("--repo", str(store.path), "--tenant", "acme", "init")
    assert result.exit_code == 0, result.output
    assert "Created tenant acme" in result.stdout
    assert_error(invoke("--repo", str(store.path), "--tenant", "acme", "init"), 2, "already exists")
    acme = invoke(
        "--repo", str(store.path), "--tenant", "acme", "commit", "-m", "a", input='{"id": "k", "content": 1}'
    )
    assert acme.exit_code == 0, acme.output
    assert store.ok("ls") == ""
    assert_error(invoke("--repo", str(store.path), "--tenant", "nope", "log"), 3, "no tenant named 'nope'")
    assert_error(invoke("--repo", str(store.path), "--tenant", "Bad!", "log"), 2, "not a tenant name")


# -- commit ---------------------------------------------------------------------


def test_empty_store_lists_nothing(store: Store) -> None:
    for command in ("log", "ls", "branch"):
        result = store.run(command)
        assert (result.exit_code, result.stdout, result.stderr) == (0, "", ""), command


def test_commit_reads_object_array_and_json_lines(store: Store, tmp_path: Path) -> None:
    assert store.doc("commit", "-m", "one", input='{"id": "a", "content": 1}')["put_ids"] == ["a"]
    array = json.dumps([{"id": "b", "content": 2}, {"id": "c", "content": 3}])
    assert store.doc("commit", "-m", "array", "-", input=array)["put_ids"] == ["b", "c"]
    lines = '{"id": "d", "content": 4}\n\n{"id": "e", "content": 5}\n'
    (tmp_path / "in.jsonl").write_text(lines)
    assert store.doc("commit", "-m", "file", str(tmp_path / "in.jsonl"))["put_ids"] == ["d", "e"]
    assert [n["content"] for n in store.lines("ls")] == [1, 2, 3, 4, 5]


def test_commit_json_shape_and_generated_ids(store: Store) -> None:
    out = store.doc("commit", "-m", "gen", input='{"content": "no id"}\n{"id": "x", "content": 1}')
    assert list(out) == COMMIT_RESULT_KEYS
    assert HEX64.fullmatch(out["id"]) and HEX64.fullmatch(out["tree"])
    assert (out["parents"], out["message"], out["meta"]) == ([], "gen", {})
    assert RFC3339_Z.fullmatch(out["record_time"])
    assert (out["deleted_ids"], out["created"]) == ([], True)
    assert store.lines("log")[0]["id"] == out["id"]
    generated, given = out["put_ids"]
    assert given == "x"
    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", generated)
    assert store.doc("show", generated)["content"] == "no id"


def test_commit_human_output(store: Store) -> None:
    out = store.ok("commit", "-m", "first line\nmore", input='{"id": "a/b", "content": 1}')
    head, ids = out.splitlines()
    assert re.fullmatch(r"\[main [0-9a-f]{7}\] first line", head)
    assert ids == " + a/b"
    # A put that replaces a version is marked as diff marks it: "~", beside an added "+".
    out = store.ok("commit", "-m", "second", input='{"id": "a/b", "content": 2}\n{"id": "c", "content": 3}')
    assert out.splitlines()[1:] == [" ~ a/b", " + c"]
    diff = store.ok("diff", "HEAD~1", "HEAD")
    assert "~ a/b" in diff and "+ c" in diff


def test_node_json_has_every_field(store: Store) -> None:
    node = {
        "id": "users/mira/passport_deadline",
        "content": "2026-07-15",
        "kind": "note",
        "provenance": {"agent_step": 3, "observation": "e1", "source": "chat"},
        "event_time": "2026-06-01T11:00:00+02:00",
        "meta": {"sensitivity": "personal"},
    }
    store.put(node, {"id": "bare", "content": {"k": [1, 2]}})
    shown = store.doc("show", "users/mira/passport_deadline")
    assert list(shown) == NODE_KEYS
    assert list(shown["provenance"]) == PROVENANCE_KEYS
    assert shown["provenance"] == {"agent_step": 3, "observation": "e1", "tool_call": None, "source": "chat"}
    assert shown["event_time"] == "2026-06-01T09:00:00Z"
    assert shown["meta"] == {"sensitivity": "personal"}
    assert shown["expires_at"] is None
    assert HEX64.fullmatch(shown["hash"])
    bare = store.doc("show", "bare")
    assert (bare["meta"], bare["event_time"], bare["kind"]) == ({}, None, "note")
    assert bare["provenance"] == dict.fromkeys(PROVENANCE_KEYS)


def test_claims_round_trip_with_every_field(store: Store) -> None:
    content = {"subject": "mira", "predicate": "deadline", "value": "2026-06-30", "valid_from": "2026-06-03"}
    store.put({"id": "claims/e2", "kind": "claim", "content": content})
    shown = store.doc("show", "claims/e2")
    assert shown["kind"] == "claim"
    assert shown["content"] == {
        "subject": "mira",
        "predicate": "deadline",
        "value": "2026-06-30",
        "valid_from": "2026-06-03T00:00:00Z",
        "valid_to": None,
        "confidence": None,
        "evidence": [],
    }


def test_ls_json_output_commits_back_to_identical_hashes(store: Store, tmp_path: Path) -> None:
    store.put(
        {
            "id": "n",
            "content": "text",
            "provenance": {"tool_call": "t1"},
            "expires_at": "2030-01-01T00:00:00Z",
        },
        {
            "id": "c",
            "kind": "claim",
            "content": {
                "subject": "s",
                "predicate": "p",
                "value": 1,
                "valid_from": "2026-01-01T00:00:00Z",
                "confidence": 0.5,
            },
        },
    )
    exported = store.run("ls", as_json=True).stdout
    other = Store(tmp_path / "other.mnemo")
    assert other.run("commit", "-m", "copy", input=exported).exit_code == 0
    assert [n["hash"] for n in other.lines("ls")] == [
        json.loads(line)["hash"] for line in exported.splitlines()
    ]


def test_author_comes_from_option_env_or_user(store: Store, monkeypatch) -> None:
    store.put({"id": "a", "content": 1}, author="opt")
    monkeypatch.setenv("MNEMO_AUTHOR", "from-env")
    store.ok("commit", "-m", "m", input='{"id": "b", "content": 1}')
    monkeypatch.delenv("MNEMO_AUTHOR")
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    store.ok("commit", "-m", "m", input='{"id": "c", "content": 1}')

    def no_user() -> str:
        raise OSError("no user")

    monkeypatch.setattr("getpass.getuser", no_user)
    store.ok("commit", "-m", "m", input='{"id": "d", "content": 1}')
    assert [c["author"] for c in store.lines("log")] == ["unknown", "alice", "from-env", "opt"]


def test_commit_to_another_branch_and_with_parent(store: Store) -> None:
    first = store.put({"id": "a", "content": 1})
    store.ok("branch", "side")
    store.ok("commit", "-m", "side", "--branch", "side", input='{"id": "s", "content": 1}')
    assert [n["id"] for n in store.lines("ls")] == ["a"]
    assert [n["id"] for n in store.lines("ls", "--at", "side")] == ["a", "s"]
    store.ok("commit", "-m", "ok", "--parent", first, input='{"id": "b", "content": 1}')
    stale = store.run("commit", "-m", "late", "--parent", first, input='{"id": "c", "content": 1}')
    assert_error(stale, 4, "moved")
    typo = store.run("commit", "-m", "typo", "--branch", "sdie", input='{"id": "t", "content": 1}')
    assert_error(typo, 3, "no branch 'sdie'")
    assert [b["name"] for b in store.lines("branch")] == ["main", "side"]
    assert store.ok("branch", "fresh", "--orphan") == (
        "Created branch fresh (no commits yet: its first commit starts it)\n"
    )
    root = store.doc("commit", "-m", "root", "--branch", "fresh", input='{"id": "r", "content": 1}')
    assert root["parents"] == []
    assert [n["id"] for n in store.lines("ls", "--at", "fresh")] == ["r"]


def test_allow_empty(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    assert_error(store.run("commit", "-m", "nothing", input=""), 2, "--allow-empty")
    tip = store.lines("log")[0]["id"]
    # Writing the same versions again changes nothing: no commit, and not an error.
    same = store.result("commit", "-m", "same", input='{"id": "a", "content": 1}')
    assert (same.stdout, same.stderr) == (f"nothing to commit: branch main is unchanged at {tip[:7]}\n", "")
    again = store.doc("commit", "-m", "same", input='{"id": "a", "content": 1}')
    assert (again["id"], again["created"], again["message"]) == (tip, False, "m")
    assert store.run("commit", "-m", "marker", "--allow-empty", input="").exit_code == 0
    assert [c["message"] for c in store.lines("log")] == ["marker", "m"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '{"id": "a", "content": 1}\n{"id": "b", "content": }',
            "invalid JSON at line 2, column 24: Expecting value",
        ),
        ('[{"id": "a", "content": 1},\n {"id": "b" "content": 2}]', "line 2, column 13"),
        ('{"id": "a//b", "content": 1}', "empty, '.' or '..' segment"),
        ('{"id": "a"}', 'needs "content"'),
        ('{"id": "a", "content": 1, "colour": "red"}', "unknown field 'colour'"),
        ('{"id": "a", "content": 1, "provenance": {"step": 1}}', "unknown provenance field 'step'"),
        ('{"id": "a", "content": 1, "provenance": {"agent_step": "x"}}', "agent_step must be an integer"),
        ('{"id": "a", "content": 1, "event_time": "2026-06-01T09:00:00"}', "has no timezone"),
        ('{"id": "a", "content": 1, "kind": "memo"}', "kind must be"),
        ('{"id": "c", "kind": "claim", "content": {"subject": "s"}}', "claim content"),
        ('[{"id": "a", "content": 1}, 7]', "line 1, [1]: expected a node object"),
        ('"just text"', "expected a node object"),
        ('{"id": "a", "content": 1}\n{"id": "a", "content": 2}', "more than once"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store: Store, text: str, fragment: str) -> None:
    assert_error(store.run("commit", "-m", "bad", input=text), 2, fragment)
    assert store.lines("log") == []


def test_unreadable_input_file(store: Store, tmp_path: Path) -> None:
    assert_error(store.run("commit", "-m", "x", str(tmp_path / "missing.json")), 2, "cannot read")
    (tmp_path / "latin1.json").write_bytes(b'{"id": "a", "content": "\xe9"}')
    assert_error(store.run("commit", "-m", "x", str(tmp_path / "latin1.json")), 2, "not UTF-8")


def test_missing_message_is_a_usage_error(store: Store) -> None:
    result = store.run("commit", input='{"id": "a", "content": 1}')
    assert result.exit_code == 2
    assert "--message" in result.stderr
    assert "Traceback" not in result.output


# -- rm, show, ls ---------------------------------------------------------------


def test_rm_removes_and_reports(store: Store) -> None:
    store.put({"id": "a", "content": 1}, {"id": "b", "content": 2}, {"id": "c", "content": 3})
    removed = store.doc("rm", "a", "b", "-m", "forget two")
    assert (removed["deleted_ids"], removed["put_ids"], removed["created"]) == (["a", "b"], [], True)
    assert list(removed) == COMMIT_RESULT_KEYS
    assert [n["id"] for n in store.lines("ls")] == ["c"]
    assert_error(store.run("show", "a"), 3, "a is not in HEAD")
    # Removing an id removed before, and nothing else (a retry), changes nothing: not an error.
    tip = store.lines("log")[0]["id"]
    again = store.result("rm", "a", "-m", "x")
    assert again.stdout == f"nothing to commit: branch main is unchanged at {tip[:7]}\n"
    assert store.doc("rm", "a", "-m", "x") == {
        **store.lines("log")[0],
        "put_ids": [],
        "modified_ids": [],
        "deleted_ids": [],
        "created": False,
    }
    assert store.lines("log")[0]["id"] == tip
    # An id never written is a mistake (a typo), alone or beside a change; nothing is written.
    assert_error(store.run("rm", "zz", "-m", "x"), 3, "cannot remove zz")
    assert_error(store.run("rm", "c", "zz", "-m", "x"), 3, "cannot remove zz")
    assert store.lines("log")[0]["id"] == tip
    human = store.ok("rm", "c", "-m", "last")
    assert human.splitlines()[1] == " - c"


def test_show_human_output(store: Store) -> None:
    store.put({"id": "k", "content": "line one\nline two", "provenance": {"agent_step": 3, "source": "chat"}})
    out = store.ok("show", "k")
    full = store.doc("show", "k")["hash"]
    assert f"hash:       {full[:7]}\n" in out
    assert full not in out
    assert "provenance: agent_step=3 source=chat" in out
    assert out.endswith("\nline one\nline two\n")


def test_show_at_and_as_of(store: Store) -> None:
    store.put({"id": "k", "content": "old"})
    store.put({"id": "k", "content": "new"})
    old_time = store.lines("log")[-1]["record_time"]
    assert RFC3339_Z.fullmatch(old_time)
    assert store.doc("show", "k")["content"] == "new"
    assert store.doc("show", "k", "--at", "HEAD~1")["content"] == "old"
    assert store.doc("show", "k", "--as-of", old_time)["content"] == "old"
    assert_error(store.run("show", "k", "--as-of", "2000-01-01"), 3, "did not exist")
    assert_error(store.run("show", "k", "--as-of", "yesterday"), 2, "not an RFC 3339 time")
    assert_error(store.run("show", "k", "--at", "nosuch"), 3, "nosuch")
    assert_error(store.run("show", "bad//id"), 2, "segment")


def test_ls_prefix_at_and_human(store: Store) -> None:
    store.put({"id": "users/mira/a", "content": "x" * 100}, {"id": "users/tom/b", "content": {"k": 1}})
    store.put({"id": "users/mira/c", "content": 3})
    assert [n["id"] for n in store.lines("ls", "--prefix", "users/mira/")] == ["users/mira/a", "users/mira/c"]
    assert [n["id"] for n in store.lines("ls", "--at", "HEAD~1")] == ["users/mira/a", "users/tom/b"]
    rows = store.ok("ls").splitlines()
    assert len(rows) == 3
    assert re.fullmatch(r"[0-9a-f]{7}  note   users/mira/a  x{59}…", rows[0])
    assert rows[2].endswith('users/tom/b  {"k": 1}')


# -- log ------------------------------------------------------------------------


def test_log_order_limit_node_and_rev(store: Store) -> None:
    c1 = store.put({"id": "a", "content": 1}, message="one")
    c2 = store.put({"id": "b", "content": 1}, message="two")
    c3 = store.put({"id": "a", "content": 2}, message="three")
    entries = store.lines("log")
    assert [e["id"] for e in entries] == [c3, c2, c1]
    assert entries[0]["parents"] == [c2] and entries[2]["parents"] == []
    assert list(entries[0]) == COMMIT_KEYS
    assert RFC3339_Z.fullmatch(entries[0]["record_time"])
    assert [e["id"] for e in store.lines("log", "-n", "2")] == [c3, c2]
    assert [e["id"] for e in store.lines("log", "--limit", "2")] == [c3, c2]
    assert [e["id"] for e in store.lines("log", "--node", "a")] == [c3, c1]
    assert [e["id"] for e in store.lines("log", c2[:8])] == [c2, c1]
    assert [e["id"] for e in store.lines("log", "--as-of", entries[1]["record_time"])] == [c2, c1]
    assert store.ok("log", "--oneline").splitlines() == [f"{c3[:7]} three", f"{c2[:7]} two", f"{c1[:7]} one"]
    human = store.ok("log", "-n", "1")
    assert human.splitlines()[:2] == [f"commit {c3[:7]}", "Author: tester"]
    assert c3 not in human
    assert_error(store.run("log", "nosuch"), 3, "nosuch")
    assert store.run("log", "-n", "-1").exit_code == 2


# -- errors at the edge ---------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (mnemosyne.InvalidInput("x"), 2),
        (mnemosyne.ClaimConflict("x"), 2),
        (mnemosyne.MergeConflict("x"), 2),
        (mnemosyne.NotFound("x"), 3),
        (mnemosyne.Redacted("x"), 3),
        (mnemosyne.RefConflict("x"), 4),
        (mnemosyne.CorruptObject("x"), 5),
        (mnemosyne.StorageFull("x"), 6),
        (mnemosyne.MnemoError("x"), 1),
    ],
)
def test_every_library_error_has_its_exit_code(store: Store, monkeypatch, error, code) -> None:
    assert exit_code(error) == code

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(mnemosyne.Repo, "log", fail)
    assert_error(store.run("log"), code, "x")


def test_multi_line_messages_become_one_line(store: Store, monkeypatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise mnemosyne.CorruptObject("first\nsecond")

    monkeypatch.setattr(mnemosyne.Repo, "log", fail)
    assert_error(store.run("log"), 5, "first; second")


def test_interrupt_exits_130(store: Store, monkeypatch) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(mnemosyne.Repo, "log", interrupt)
    assert store.run("log").exit_code == 130


def test_unexpected_errors_are_one_line_at_the_edge(store: Store, monkeypatch, capsys) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret-free boom")

    monkeypatch.setattr(mnemosyne.Repo, "log", boom)
    monkeypatch.setattr("sys.argv", ["mnemo", "--repo", str(store.path), "log"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err == "error: RuntimeError: secret-free boom\n"


def test_os_errors_are_one_line(store: Store, monkeypatch) -> None:
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(mnemosyne.Repo, "log", denied)
    assert_error(store.run("log"), 1, "Permission denied")


@pytest.mark.parametrize("group", [[], ["tenant"], ["config"]])
def test_a_group_run_bare_shows_its_help_not_an_error(group: list[str]) -> None:
    result = invoke(*group)
    assert "Usage:" in result.output
    assert "Commands" in result.output
    assert "error:" not in result.output


def _registered(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and sub-command registered under ``group``, each with its path of names."""
    found = []
    for name in group.list_commands(None):
        command = group.get_command(None, name)
        found.append(((*path, name), command))
        if hasattr(command, "commands"):  # a group: walk its own commands
            found.extend(_registered(command, (*path, name)))
    return found


def test_every_command_has_help() -> None:
    import typer
    from mnemo_cli.app import COMMANDS

    commands = _registered(typer.main.get_command(app))
    assert {path[0] for path, _ in commands} == set(COMMANDS)
    assert any(len(path) > 1 for path, _ in commands), "no sub-commands found"
    helps: dict[tuple[str, ...], str] = {}  # each group's --help, read once
    problems = []
    for path, command in commands:
        words = " ".join(path)
        if not (command.help or "").strip():
            problems.append(f"{words}: no help text")
        listing = helps.setdefault(path[:-1], invoke(*path[:-1], "--help").stdout)
        if not re.search(rf"^  {re.escape(path[-1])}\s+\S", listing, re.MULTILINE):
            problems.append(f"{words}: not listed in its group's --help")
        result = invoke(*path, "--help")
        if result.exit_code != 0:
            problems.append(f"{words} --help: exit {result.exit_code}")
        if not result.stdout.startswith(f"Usage: mnemo {words} "):
            problems.append(f"{words} --help: no 'Usage: mnemo {words} ...' line")
    assert not problems, problems


def test_every_command_is_in_the_command_line_page() -> None:
    from mnemo_cli.app import COMMANDS

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in COMMANDS
        if not re.search(rf"\bmnemo {re.escape(name)}\b", page)
        and not re.search(rf"^\|\s*`(mnemo )?{re.escape(name)}\b", page, re.MULTILINE)
    ]
    assert not missing, f"not in docs/cli.md: {missing}"


def test_version_and_no_command() -> None:
    assert invoke("--version").stdout == f"mnemo {mnemosyne.__version__}\n"
    result = invoke()
    assert result.exit_code == 2
    assert "Usage: mnemo" in result.output


def test_the_app_module_registers_exactly_the_issue_commands() -> None:
    import typer
    from mnemo_cli.app import COMMANDS

    group = typer.main.get_command(app)
    built = {name: group.get_command(None, name) for name in group.list_commands(None)}  # type: ignore[attr-defined]
    assert all(command is not None and command.name == name for name, command in built.items())
    groups = {"tenant", "config", "remote", "token"}
    assert {name for name, command in built.items() if hasattr(command, "commands")} == groups
    names = sorted(name for name in COMMANDS if name not in groups)
    assert names == sorted(
        [
            "init",
            "commit",
            "rm",
            "verify",
            "show",
            "ls",
            "log",
            "history",
            "blame",
            "diff",
            "threads",
            "branch",
            "switch",
            "reset",
            "revert",
            "merge",
            "bisect",
            "facts",
            "timeline",
            "contradictions",
            "fsck",
            "reindex",
            "export",
            "import",
            "forget",
            "gc",
            "search",
            "context",
            "reads",
            "mcp",
            "ui",
            "serve",
            "clone",
            "fetch",
            "pull",
            "push",
        ]
    )


# -- history and blame ----------------------------------------------------------


def test_history_statuses_and_shape(store: Store) -> None:
    c1 = store.put({"id": "k", "content": "v1"}, message="write")
    c2 = store.put({"id": "k", "content": "v2"}, message="correct")
    store.ok("rm", "k", "-m", "drop")
    c4 = store.put({"id": "k", "content": "v3"}, message="again")
    versions = store.lines("history", "k")
    assert [(v["status"], v["commit"]["id"], v["node"]["content"]) for v in versions] == [
        ("current", c4, "v3"),
        ("deleted", c2, "v2"),
        ("superseded", c1, "v1"),
    ]
    assert list(versions[0]) == VERSION_KEYS
    assert list(versions[0]["commit"]) == COMMIT_KEYS
    assert versions[0]["id"] == "k"
    assert RFC3339_Z.fullmatch(versions[0]["commit"]["record_time"])
    assert versions[0]["hash"] == versions[0]["node"]["hash"]
    current = versions[0]
    assert (current["ended_by"], current["superseded_by"], current["redaction"]) == (None, None, None)
    assert versions[1]["ended_by"] == store.lines("log")[1]["id"]
    assert versions[2]["superseded_by"] == versions[1]["hash"]
    assert versions[2]["ended_by"] == c2
    assert list(versions[0]["node"]) == NODE_KEYS
    rows = store.ok("history", "k").splitlines()
    assert re.match(rf"{versions[0]['hash'][:7]}  current     {c4[:7]}  \S+Z  tester  again$", rows[0])
    assert_error(store.run("history", "never"), 3, "never has no history")
    assert [v["node"]["content"] for v in store.lines("history", "k", "--at", c2)] == ["v2", "v1"]


def test_blame_attributes_lines_and_fields(store: Store) -> None:
    c1 = store.put(
        {"id": "t", "content": "alpha\nbeta"}, {"id": "j", "content": {"a": 1, "b": 2}}, author="ann"
    )
    c2 = store.put(
        {"id": "t", "content": "alpha\nBETA\ngamma", "provenance": {"agent_step": 9, "observation": "e2"}},
        {"id": "j", "content": {"a": 1, "b": 3}},
        message="fix\nbody",
        author="bob",
    )
    blame = store.doc("blame", "t")
    assert list(blame) == BLAME_KEYS
    assert list(blame["commit"]) == COMMIT_KEYS
    commit = blame["commit"]
    assert (blame["id"], commit["id"], commit["author"], commit["message"]) == ("t", c2, "bob", "fix\nbody")
    assert blame["hash"] == blame["node"]["hash"]
    assert (blame["redacted"], blame["redaction"]) == (False, None)
    assert blame["node"]["provenance"] == {
        "agent_step": 9,
        "observation": "e2",
        "tool_call": None,
        "source": None,
    }
    assert list(blame["lines"][0]) == ["key", "text", "commit", "author", "record_time"]
    assert [(line["text"], line["commit"]) for line in blame["lines"]] == [
        ("alpha", c1),
        ("BETA", c2),
        ("gamma", c2),
    ]
    fields = store.doc("blame", "j")["lines"]
    assert [(f["key"], f["text"], f["author"]) for f in fields] == [("a", "1", "ann"), ("b", "3", "bob")]
    human = store.ok("blame", "t").splitlines()
    assert human[:7] == [
        "id:         t",
        f"hash:       {blame['hash'][:7]}",
        f"commit:     {c2[:7]}",
        "author:     bob",
        f"date:       {commit['record_time'][:19]}Z",
        "message:    fix",
        "provenance: agent_step=9 observation=e2",
    ]
    assert re.fullmatch(rf"{c1[:7]} \(ann \S+Z\) alpha", human[8])
    assert store.ok("blame", "j").splitlines()[-1].endswith(") b: 3")
    assert store.doc("blame", "t", "--at", c1)["commit"]["id"] == c1
    assert_error(store.run("blame", "nope"), 3, "nope is not in")


# -- diff -----------------------------------------------------------------------


def test_diff_json_and_stat(store: Store) -> None:
    a = store.put(
        {"id": "users/mira/x", "content": 1},
        {"id": "users/mira/y", "content": 2},
        {"id": "top", "content": 0},
    )
    b = store.put({"id": "users/mira/x", "content": 5}, {"id": "notes/n", "content": "hi"})
    store.ok("rm", "users/mira/y", "top", "-m", "rm")
    out = store.doc("diff", a, "HEAD")
    assert out["a"] == a and HEX64.fullmatch(out["b"]) and out["b"] != b
    assert list(out) == ["a", "b", "added", "removed", "modified"]

    def ids(changes: list[dict[str, Any]]) -> list[str]:
        return [change["id"] for change in changes]

    assert (ids(out["added"]), ids(out["removed"]), ids(out["modified"])) == (
        ["notes/n"],
        ["top", "users/mira/y"],
        ["users/mira/x"],
    )
    added, modified = out["added"][0], out["modified"][0]
    assert list(added) == CHANGE_KEYS
    assert (added["old"], added["old_hash"], added["redacted"]) == (None, None, False)
    assert added["new"]["content"] == "hi" and added["new_hash"] == added["new"]["hash"]
    assert (modified["old"]["content"], modified["new"]["content"]) == (1, 5)
    assert modified["old_hash"] == modified["old"]["hash"] != modified["new_hash"]
    removed = out["removed"][0]
    assert (removed["old"]["content"], removed["new"], removed["new_hash"]) == (0, None, None)
    stat = store.doc("diff", a, "HEAD", "--stat")["stat"]
    assert stat == [
        {"namespace": "", "added": 0, "removed": 1, "modified": 0},
        {"namespace": "notes", "added": 1, "removed": 0, "modified": 0},
        {"namespace": "users/mira", "added": 0, "removed": 1, "modified": 1},
    ]
    human = store.ok("diff", a, "HEAD", "--stat").splitlines()
    assert human == [
        " .          | +0 -1 ~0",
        " notes      | +1 -0 ~0",
        " users/mira | +0 -1 ~1",
        " 4 ids changed in 3 namespaces: 1 added, 2 removed, 1 modified",
    ]
    assert store.doc("diff", "HEAD", "HEAD") == {
        "a": out["b"],
        "b": out["b"],
        "added": [],
        "removed": [],
        "modified": [],
    }
    assert store.ok("diff", "HEAD", "HEAD") == ""
    assert_error(store.run("diff", a, "nosuch"), 3, "nosuch")


def test_diff_human_shows_text_and_key_changes(store: Store) -> None:
    a = store.put(
        {"id": "text", "content": "one\ntwo\nthree"},
        {"id": "json", "content": {"keep": 1, "change": "old", "drop": True}, "meta": {"m": 1}},
        {"id": "gone", "content": "bye"},
    )
    store.put(
        {"id": "text", "content": "one\n2\nthree"},
        {"id": "json", "content": {"keep": 1, "change": "new", "add": [1]}, "meta": {"m": 2}},
        {"id": "new", "content": "hello"},
    )
    store.ok("rm", "gone", "-m", "rm")
    assert store.ok("diff", a, "HEAD").splitlines() == [
        "- gone",
        "    -bye",
        "~ json",
        "    +add: [1]",
        '    -change: "old"',
        '    +change: "new"',
        "    -drop: true",
        "    -meta.m: 1",
        "    +meta.m: 2",
        "+ new",
        "    +hello",
        "~ text",
        "    @@ -1,3 +1,3 @@",
        "     one",
        "    -two",
        "    +2",
        "     three",
    ]


# -- branches, switch, reset, revert ---------------------------------------------


def test_branch_create_list_switch_delete(store: Store) -> None:
    c1 = store.put({"id": "a", "content": 1})
    c2 = store.put({"id": "b", "content": 1})
    assert store.doc("branch", "old", "--from", "HEAD~1") == {"name": "old", "commit": c1}
    assert store.ok("branch", "new").startswith(f"Created branch new at {c2[:7]}")
    assert store.lines("branch") == [
        {"name": "main", "commit": c2, "current": True},
        {"name": "new", "commit": c2, "current": False},
        {"name": "old", "commit": c1, "current": False},
    ]
    switched = store.run("switch", "old")
    assert (switched.exit_code, switched.stdout) == (0, "")
    assert "Switched to branch 'old'" in switched.stderr
    assert store.ok("branch").splitlines() == [
        f"  main  {c2[:7]} m",
        f"  new   {c2[:7]} m",
        f"* old   {c1[:7]} m",
    ]
    c3 = store.put({"id": "c", "content": 1})
    assert store.lines("log")[0]["parents"] == [c1]
    assert [n["id"] for n in store.lines("ls")] == ["a", "c"]
    assert_error(store.run("branch", "-d", "old"), 2, "current branch")
    assert store.doc("switch", "main") == {"head": "main"}
    assert store.doc("branch", "-d", "old") == {"deleted": "old", "commit": c3}
    assert store.ok("branch", "-d", "new") == f"Deleted branch new (was {c2[:7]}).\n"
    assert [b["name"] for b in store.lines("branch")] == ["main"]
    assert_error(store.run("branch", "-d", "ghost"), 3, "no branch named 'ghost'")
    assert_error(store.run("branch", "main"), 2, "already exists")
    assert_error(store.run("branch", "bad..name"), 2, "not a valid branch name")
    assert_error(store.run("switch", "ghost"), 3, "no branch named 'ghost'")


def test_branch_usage_errors(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    for args in (
        ["branch", "-d"],
        ["branch", "--from", "HEAD"],
        ["branch", "-d", "x", "--from", "HEAD"],
        ["branch", "--orphan"],
        ["branch", "-d", "x", "--orphan"],
        ["branch", "x", "--orphan", "--from", "HEAD"],
    ):
        result = store.run(*args)
        assert result.exit_code == 2, args
        assert "Traceback" not in result.output


def test_reset_moves_the_branch_and_keeps_as_of_honest(store: Store) -> None:
    c1 = store.put({"id": "k", "content": "v1"})
    store.put({"id": "k", "content": "v2"})
    before_reset = store.lines("log")[0]["record_time"]
    assert store.doc("reset", "main", "HEAD~1") == {"branch": "main", "commit": c1}
    assert store.doc("show", "k")["content"] == "v1"
    assert store.doc("show", "k", "--as-of", before_reset)["content"] == "v2"
    assert store.ok("reset", "main", c1) == f"main is now at {c1[:7]} m\n"
    assert_error(store.run("reset", "ghost", c1), 3, "no branch named 'ghost'")
    assert_error(store.run("reset", "main", "nosuch"), 3, "nosuch")


def test_revert_undoes_one_commit(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    c2 = store.put({"id": "a", "content": 2}, {"id": "b", "content": 1}, message="bad step")
    out = store.doc("revert", "HEAD")
    assert list(out) == ["commit", "reverted"]
    assert out["reverted"] == c2 and HEX64.fullmatch(out["commit"]["id"])
    assert list(out["commit"]) == COMMIT_RESULT_KEYS  # the revert commit, with what it wrote
    assert (out["commit"]["put_ids"], out["commit"]["deleted_ids"]) == (["a"], ["b"])
    assert out["commit"]["message"] == f"Revert {c2[:7]}: bad step"
    assert {n["id"]: n["content"] for n in store.lines("ls")} == {"a": 1}
    assert store.lines("log")[0]["message"] == f"Revert {c2[:7]}: bad step"
    human = store.ok("revert", "HEAD", "-m", "redo", "--author", "carol")
    assert re.fullmatch(r"\[main [0-9a-f]{7}\] redo\n", human)
    assert store.lines("log")[0]["author"] == "carol"
    store.put({"id": "b", "content": 9})
    assert_error(store.run("revert", c2), 2, "has changed since")


# -- expiry and claim conflicts ---------------------------------------------------


def test_expired_nodes_are_hidden_unless_asked_for(store: Store) -> None:
    store.put(
        {"id": "old", "content": 1, "expires_at": "2001-01-01T00:00:00Z"},
        {"id": "live", "content": 2, "expires_at": "2999-01-01"},
    )
    assert [n["id"] for n in store.lines("ls")] == ["live"]
    assert [n["id"] for n in store.lines("ls", "--include-expired")] == ["live", "old"]
    assert_error(store.run("show", "old"), 3, "old expired at 2001-01-01T00:00:00Z in HEAD")
    assert store.doc("show", "old", "--include-expired")["expires_at"] == "2001-01-01T00:00:00Z"
    assert_error(store.run("show", "never"), 3, "never is not in HEAD")


def test_claim_conflict_policy(store: Store) -> None:
    def claim(node_id: str, value: str) -> str:
        content = {"subject": "mira", "predicate": "deadline", "value": value, "valid_from": "2026-06-03"}
        return json.dumps({"id": node_id, "kind": "claim", "content": content})

    store.ok("commit", "-m", "first", input=claim("c/1", "a"))
    assert_error(store.run("commit", "-m", "clash", input=claim("c/2", "b")), 2, "claim c/2 starts at")
    store.ok("commit", "-m", "keep", "--on-claim-conflict", "keep", input=claim("c/2", "b"))
    assert [n["id"] for n in store.lines("ls")] == ["c/1", "c/2"]
    store.ok("commit", "-m", "replace", "--on-claim-conflict", "replace", input=claim("c/3", "c"))
    assert [n["id"] for n in store.lines("ls")] == ["c/3"]
    bad = store.run("commit", "-m", "x", "--on-claim-conflict", "ignore", input=claim("c/4", "d"))
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output


def test_usage_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert invoke("--repo", store, "init").exit_code == 0
    # An id that starts with '-' reads as an option: say how to pass it.
    assert_error(invoke("--repo", store, "show", "-//x"), 2, "put '--' before it")
    assert_error(invoke("--repo", store, "show"), 2, "Missing argument")
    assert_error(invoke("--repo", store, "--no-such-flag", "ls"), 2, "No such option")
    # After '--' the id reaches validation, which names the problem.
    assert_error(invoke("--repo", store, "show", "--", "-//x"), 2, "segment")
