"""The documentation's examples run as written, its links lead somewhere, and `make demo` runs.

The pages are ``README.md`` and every ``docs/*.md`` (not the ADRs in ``docs/adr/``).
Their ```python and ```console blocks are tests, one each, named by page and number:
``docs/recall.md:3`` is the third runnable block of that page, counting ```python and
```console blocks in page order. Blocks of other languages (```sh, ```json) and
indented blocks are shown, not run.

Every block stands alone. A ```python block runs in a fresh namespace, with a fresh
temporary directory as the working directory, and with ``default_embedder()``
returning the small deterministic ``HashEmbedder(384)`` instead of the MiniLM model
(as the pages say), so recall examples need no model and give the same hits on every
machine; tracebacks name the page and its line. A ```console block is a shell
session: ``$ `` lines are run one after another with bash in a fresh directory
(``MNEMO_DIR`` unset, this interpreter's ``bin`` first on ``PATH``) and must exit 0,
or the code written after them as ``# exit N``. The other lines of the block are
expected output of the command above them, matched in order against the lines it
printed (stdout, then stderr, as a terminal would show them):

- a line that is JSON matches a JSON line of output with the same keys and equal
  values (in any order), where the string ``"..."`` matches any value; an object
  that holds the key ``"..."`` marks a cut: the output may have more keys, so a
  sample never drops fields without saying so;
- any other line must equal an output line, with ``...`` matching any text.

So no block depends on the blocks before it, on its page or on another: a page's
examples can be moved, reordered or run in parallel, and each block sets up what it
uses (a console session starts with ``mnemo init``). Console blocks start ``mnemo``
processes and are marked ``slow``, as are Python blocks that import LangGraph; the
other Python blocks run in well under a second.

Every ``docs/*.md`` page has at least one runnable block unless it is listed in
``PROSE_ONLY``; every relative link (and ``#anchor``, by GitHub's heading slugs) of
every page must resolve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mnemo_cli import exits

from mnemosyne.recall import embedders

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
DEMO = ROOT / "examples" / "demo.py"

PAGES = [README, *sorted(DOCS.glob("*.md"))]
"""The documentation: the README and the pages of ``docs/`` (not the ADRs)."""
PROSE_ONLY = {"docs/internals.md", "docs/mcp.md", "docs/viewer.md", "docs/typescript.md"}
"""Pages that show nothing a test can run (layout tables, host configuration, screenshots; TypeScript,
whose code tests/test_typescript.py runs)."""
RUNNABLE = ("python", "console")
"""The languages of the blocks that run; others are shown only."""

_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
_WILDCARD = "..."
_SLOW_PYTHON = re.compile(r"^\s*(from|import)\s+langgraph\b", re.MULTILINE)
_MNEMO = re.compile(r"(^|[\s|;&(])mnemo\b")
DOCS_EMBEDDER_DIM = 384
"""Dimensions of the ``HashEmbedder`` that stands in for the default embedder."""
HASH_EMBEDDER_NOTE = "runs this example with the deterministic `HashEmbedder`"
"""What a page says when one of its examples calls ``default_embedder()``."""


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Fence:
    language: str
    line: int  # the line of the block's first source line, 1-based
    source: str


def fences(text: str) -> list[Fence]:
    """Every fenced block of a Markdown text, with its language (first word of the info string)."""
    found: list[Fence] = []
    opened: tuple[str, str, int] | None = None  # (marker, language, first line)
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if opened is None:
            start = re.match(r"(`{3,}|~{3,})\s*([^\s`]*)", stripped)
            if start:
                opened = (start.group(1), start.group(2), number + 1)
                body = []
        elif stripped.startswith(opened[0]) and not stripped.strip(opened[0][0]):
            found.append(Fence(opened[1], opened[2], "".join(f"{b}\n" for b in body)))
            opened = None
        else:
            body.append(line)
    assert opened is None, f"a fence opened at line {opened[2] - 1} is never closed"
    return found


@dataclass(frozen=True)
class Block:
    page: str
    number: int  # among the page's runnable blocks, 1-based
    language: str
    line: int
    source: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"

    @property
    def slow(self) -> bool:
        if self.language == "console":
            return any(_MNEMO.search(step.command) for step in parse_session(self.source))
        return _SLOW_PYTHON.search(self.source) is not None


def blocks(page: Path) -> list[Block]:
    """The runnable blocks of one page, in page order."""
    runnable = [f for f in fences(page.read_text(encoding="utf-8")) if f.language in RUNNABLE]
    return [Block(_name(page), n, f.language, f.line, f.source) for n, f in enumerate(runnable, start=1)]


def _sources(page: Path, language: str) -> list[str]:
    return [block.source for block in blocks(page) if block.language == language]


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]


@dataclass
class Step:
    command: str
    exit_code: int = 0
    expected: list[str] = field(default_factory=list)
    line: int = 0  # within the block, 0-based


def parse_session(block: str) -> list[Step]:
    """Split a console block into commands, their expected exit codes and output."""
    steps: list[Step] = []
    for index, line in enumerate(block.splitlines()):
        if line.startswith("$ "):
            command = line[2:]
            code = 0
            found = _EXIT.search(command)
            if found:
                code = int(found.group(1))
                command = command[: found.start()]
            steps.append(Step(command.strip(), code, line=index))
        elif line.strip():
            assert steps, f"output line before any command: {line!r}"
            steps[-1].expected.append(line.rstrip())
    return steps


def json_matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has everything ``expected`` has; ``"..."`` matches anything."""
    if expected == _WILDCARD:
        return True
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        shown = {key: value for key, value in expected.items() if key != _WILDCARD}
        if _WILDCARD not in expected and shown.keys() != actual.keys():
            return False  # every field is shown, or the cut is marked
        return all(key in actual and json_matches(value, actual[key]) for key, value in shown.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(json_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return type(expected) is type(actual) and expected == actual


def line_matches(expected: str, actual: str) -> bool:
    """Whether one output line matches one expected line (see the module docstring)."""
    if expected.lstrip().startswith(("{", "[")):
        try:
            want = json.loads(expected)
        except json.JSONDecodeError:
            pass
        else:
            try:
                got = json.loads(actual)
            except json.JSONDecodeError:
                return False
            return json_matches(want, got)
    pattern = ".*".join(re.escape(part) for part in expected.strip().split(_WILDCARD))
    return re.fullmatch(pattern, actual.strip()) is not None


def unmatched(expected: list[str], output: str) -> list[str]:
    """The expected lines not found, in order, among the output's lines."""
    lines = output.splitlines()
    missing = []
    position = 0
    for want in expected:
        for index in range(position, len(lines)):
            if line_matches(want, lines[index]):
                position = index + 1
                break
        else:
            missing.append(want)
    return missing


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MNEMO_DIR", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


# -- links -------------------------------------------------------------------------


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    text = re.sub(r"[^\w\- ]", "", text.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code, where nothing is a link or heading."""
    lines = text.splitlines()
    for fence in fences(text):
        for index in range(fence.line - 2, fence.line + fence.source.count("\n")):
            lines[index] = ""
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", "\n".join(lines), flags=re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, numbered as GitHub numbers repeated ones."""
    seen: dict[str, int] = {}
    found = set()
    lines = page.read_text(encoding="utf-8").splitlines()
    for fence in fences("\n".join(lines)):
        for index in range(fence.line - 2, fence.line + fence.source.count("\n")):
            lines[index] = ""
    for line in lines:
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The targets of a page's links and images."""
    text = _prose(page.read_text(encoding="utf-8"))
    return re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)


def broken(page: Path, target: str) -> str | None:
    """Why a link from ``page`` to ``target`` leads nowhere, or None when it resolves."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return None  # another site (https:, mailto:): not checked here
    path, _, anchor = target.partition("#")
    where = (page.parent / path).resolve() if path else page
    if not where.exists():
        return f"{target}: no such file"
    if anchor and where.suffix == ".md" and anchor not in anchors(where):
        return f"{target}: no heading #{anchor} in {os.path.relpath(where, ROOT)}"
    return None


# -- the checker checks what it should ---------------------------------------------


def test_session_parsing_reads_commands_exit_codes_and_output():
    steps = parse_session("$ mnemo init\n\n$ mnemo show x   # exit 3\nline one\n")
    assert [(s.command, s.exit_code, s.expected, s.line) for s in steps] == [
        ("mnemo init", 0, [], 0),
        ("mnemo show x", 3, ["line one"], 2),
    ]


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ('{"commit": "...", "ids": ["a"]}', '{"ids":["a"],"commit":"abc"}', True),
        ('{"commit": "...", "ids": ["a"]}', '{"ids":["a"],"commit":"abc","extra":1}', False),  # a cut unsaid
        ('{"commit": "...", "...": "..."}', '{"ids":["a"],"commit":"abc","extra":1}', True),  # a cut marked
        ('{"commit": "...", "ids": ["a"]}', '{"commit": "abc", "ids": ["a", "b"]}', False),
        ('{"current": false}', '{"current": 0}', False),
        ('{"a": {"b": null, "...": "..."}}', '{"a": {"b": null, "c": 2}}', True),
        ('{"a": {"b": null}}', '{"a": {"b": null, "c": 2}}', False),
        ('{"a": 1}', "not json", False),
        ("main  ...  e1", "main  4f2a9c1  e1", True),
        ("main  ...  e1", "main  4f2a9c1  e2", False),
    ],
)
def test_line_matching(expected, actual, ok):
    assert line_matches(expected, actual) is ok


def test_expected_lines_must_appear_in_order():
    assert unmatched(["a", "c"], "a\nb\nc\n") == []
    assert unmatched(["c", "a"], "a\nb\nc\n") == ["a"]


def test_fences_give_language_first_line_and_source():
    text = "# T\n\n```python\nx = 1\n```\n\n````md\n```console\n$ a\n```\n````\n```\nbare\n```\n"
    assert fences(text) == [
        Fence("python", 4, "x = 1\n"),
        Fence("md", 8, "```console\n$ a\n```\n"),
        Fence("", 13, "bare\n"),
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Seeing the memory: mnemo ui", "seeing-the-memory-mnemo-ui"),
        ("Staleness, use and sensitivity", "staleness-use-and-sensitivity"),
        ("Does it return stale facts?", "does-it-return-stale-facts"),
        ("The `mnemo ui` viewer", "the-mnemo-ui-viewer"),
        ("See [Remotes](sharing.md#remotes)", "see-remotes"),
        ("max_map_size and limits", "max_map_size-and-limits"),
    ],
)
def test_slugs_are_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_links_in_code_are_not_links(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# P\n\n[ok](#p) `[x](nowhere.md)`\n\n```python\n# [y](gone.md)\n```\n")
    assert links(page) == ["#p"]
    assert broken(page, "#p") is None
    assert broken(page, "#q") is not None
    assert broken(page, "gone.md") is not None
    assert broken(page, "https://example.com/gone") is None


# -- the pages -----------------------------------------------------------------------


def test_readme_has_examples():
    assert _sources(README, "python"), "README.md has no ```python block"
    assert _sources(README, "console"), "README.md has no ```console block"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_starts_with_a_title_and_a_summary(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), f"{_name(page)} does not start with a '# Title'"
    assert lines[1] == "" and lines[2].strip(), f"{_name(page)} has no summary under its title"
    assert not lines[2].startswith(("#", "```", "|", "-")), f"{_name(page)}: a summary paragraph first"


def test_every_docs_page_has_a_runnable_block_or_is_prose_only():
    pages = {_name(page): blocks(page) for page in PAGES if page != README}
    without = sorted(name for name, found in pages.items() if not found)
    assert without == sorted(PROSE_ONLY), (
        f"pages with no ```python or ```console block: {without}; add an example, "
        f"or list the page in PROSE_ONLY (which must name only such pages)"
    )


def test_the_command_line_page_shows_the_everyday_commands():
    commands = {
        next((word for word in step.command.split()[1:] if not word.startswith("-")), "")
        for block in _sources(DOCS / "cli.md", "console")
        for step in parse_session(block)
        if step.command.startswith("mnemo ")
    }
    everyday = {"init", "commit", "show", "ls", "log", "history", "blame", "diff", "branch", "switch"}
    assert everyday <= commands, f"not shown in docs/cli.md: {sorted(everyday - commands)}"


def test_the_exit_code_table_lists_every_code_mnemo_exits_with():
    codes = {value for name, value in vars(exits).items() if name.isupper() and isinstance(value, int)}
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    table = {int(code) for code in re.findall(r"^\| (\d+) \|", page, re.M)}
    assert table == codes, "docs/cli.md's exit codes and cli/exits.py differ"
    said = {int(code) for code in re.findall(r"(?:^|, )(\d+) ", exits.EPILOG.removeprefix("Exit codes: "))}
    assert said == codes, "--help's exit codes and cli/exits.py differ"


def test_pages_say_when_an_example_runs_with_the_hash_embedder():
    using = [page for page in PAGES if any("default_embedder()" in s for s in _sources(page, "python"))]
    assert using, "no page shows the default embedder"
    for page in using:
        assert HASH_EMBEDDER_NOTE in page.read_text(encoding="utf-8"), _name(page)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_resolve(page):
    problems = [problem for target in links(page) if (problem := broken(page, target))]
    assert not problems, f"{_name(page)}: {problems}"


# -- the blocks ----------------------------------------------------------------------


def _small_embedder() -> embedders.Embedder:
    """What ``default_embedder()`` returns while the examples run."""
    return embedders.HashEmbedder(DOCS_EMBEDDER_DIM)


def _run_python(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(embedders, "default_embedder", _small_embedder)
    # Padded so a traceback gives the page's own line numbers; compiled as a user runs
    # it, not under this module's `from __future__ import annotations`.
    source = "\n" * (block.line - 1) + block.source
    code = compile(source, block.page, "exec", dont_inherit=True)
    exec(code, {"__name__": "__docs__"})


def _run_console(block: Block, tmp_path: Path) -> None:
    env = _environment()
    for step in parse_session(block.source):
        done = subprocess.run(
            ["bash", "-c", step.command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        where = f"{block.page}, line {block.line + step.line}"
        report = f"{where}\n$ {step.command}\n--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}"
        assert done.returncode == step.exit_code, (
            f"exit {done.returncode}, the page says {step.exit_code}\n{report}"
        )
        missing = unmatched(step.expected, f"{done.stdout}\n{done.stderr}")
        assert not missing, f"expected output not found: {missing}\n{report}"


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if b.slow else []) for b in ALL_BLOCKS],
)
def test_block_runs(block: Block, tmp_path, monkeypatch):
    if block.language == "python":
        _run_python(block, tmp_path, monkeypatch)
    else:
        _run_console(block, tmp_path)


# -- make demo ---------------------------------------------------------------------


@pytest.mark.slow
def test_demo_runs_on_a_fresh_directory(tmp_path):
    (tmp_path / "demo.mnemo").mkdir()  # a leftover from an earlier run is replaced
    (tmp_path / "demo.mnemo" / "stale").write_text("old")
    done = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}"
    assert (tmp_path / "demo.mnemo" / "data.mdb").is_file()
    assert not (tmp_path / "demo.mnemo" / "stale").exists()
    # The current deadline, and the one believed before the correction (the as-of read).
    assert "2026-06-30" in done.stdout
    assert "2026-07-15" in done.stdout
