"""Driving ``mnemo`` in-process for the CLI tests: one store, one assertion of errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mnemo_cli.app import app
from typer.testing import CliRunner, Result

runner = CliRunner()


def invoke(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, list(args), input=input, env=env)


def assert_error(result: Result, code: int, fragment: str) -> None:
    """Failed with ``code`` and one ``error:`` line on stderr mentioning ``fragment``; no stdout."""
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert fragment in lines[0], lines
    assert "Traceback" not in result.output
    assert result.stdout == ""


class CliStore:
    """A store in a temporary directory, driven through the CLI (optionally in one tenant)."""

    author = "tester"

    def __init__(self, path: Path, tenant: str | None = None) -> None:
        self.path = path
        self.tenant = tenant
        if not path.exists():
            result = invoke("init", str(path))
            assert result.exit_code == 0, result.output

    def run(self, *args: str, input: str | None = None, as_json: bool = False, **env: str) -> Result:
        prefix = ["--repo", str(self.path), *(["--tenant", self.tenant] if self.tenant else [])]
        flags = ["--json"] if as_json else []
        return invoke(*prefix, *flags, *args, input=input, env=env or None)

    def result(self, *args: str, input: str | None = None, **env: str) -> Result:
        """The result of a command that must succeed."""
        result = self.run(*args, input=input, **env)
        assert result.exit_code == 0, (args, result.output)
        return result

    def ok(self, *args: str, input: str | None = None, **env: str) -> str:
        """Stdout of a command that must succeed."""
        return self.result(*args, input=input, **env).stdout

    def doc(self, *args: str, input: str | None = None, **env: str) -> Any:
        """The one JSON document a command prints under --json."""
        result = self.run(*args, input=input, as_json=True, **env)
        assert result.exit_code == 0, (args, result.output)
        return json.loads(result.stdout)

    def lines(self, *args: str, **env: str) -> list[Any]:
        """The JSON Lines a listing prints under --json."""
        result = self.run(*args, as_json=True, **env)
        assert result.exit_code == 0, (args, result.output)
        return [json.loads(line) for line in result.stdout.splitlines()]

    def put(
        self,
        *nodes: dict[str, Any],
        message: str = "m",
        author: str | None = None,
        branch: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> str:
        """Commit nodes as JSON Lines; the new commit id."""
        text = "\n".join(json.dumps(node) for node in nodes)
        where = ("--branch", branch) if branch else ()
        who = author or self.author
        return str(self.doc("commit", "-m", message, "--author", who, *where, *extra, input=text)["id"])
