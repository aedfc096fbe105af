"""``mnemo mcp``: serve the store to an MCP host (an agent's app) over stdio.

The server itself is :mod:`mnemosyne.integrations.mcp_server`; this command
opens the store as every command does (``--repo``, ``--tenant``), reads the
author from the environment when asked, and runs the server until the host
closes its stdin. The SDK (``mcp``, pydantic) is imported here, when the
command runs, never when ``mnemo`` starts.
"""

from typing import Annotated

import typer

from mnemosyne import InvalidInput

from .render import note
from .state import author_or_default, state


def mcp(
    ctx: typer.Context,
    branch: Annotated[
        str | None,
        typer.Option(
            "--branch",
            metavar="B",
            help="Read from and write to existing branch B (default: HEAD's branch at each call).",
            show_default=False,
        ),
    ] = None,
    author: Annotated[
        str | None,
        typer.Option(
            "--author",
            metavar="NAME",
            envvar="MNEMO_AUTHOR",
            help="Who writes (default: $MNEMO_AUTHOR, else the MCP client's name, else your user name).",
            show_default=False,
        ),
    ] = None,
    allow_erase: Annotated[
        bool,
        typer.Option("--allow-erase", help="Also offer the forget tool, which erases memories for real."),
    ] = False,
) -> None:
    """Serve the store to an MCP host over stdio (the Model Context Protocol).

    Tools: recall (search), context, get, list (ids under a prefix, a page at
    a time), history, blame, diff, log, facts; remember (commit nodes given in
    their JSON form), delete (remove ids in a commit; history keeps them) and
    verify, unless the store is read-only here; and forget (erasure) with
    --allow-erase. Each memory is also a resource: mnemo://memory/ID and
    mnemo://history/ID. Results are the library's JSON form (as 'mnemo --json'
    prints them); errors, an argument a tool does not take included, come
    back as tool errors of one line, and the server keeps serving. Each call
    reads the store afresh, so several servers and commands can share one store.

    A memory written here records where it came from: provenance fields the
    node leaves empty get source "mcp" and tool_call "remember#<request id>";
    fields given are kept, and a node given with its "hash" is written exactly
    as described. The author of every write is --author, else the client's name.

    Name the store with --repo (before the command, as every global option):
    a host starts its servers in a directory of its own, where no .mnemo is
    found. The server speaks JSON-RPC on stdin and stdout: run it from an MCP
    host, not by hand. It needs the 'mcp' extra: pip install 'mnemosyne[mcp]'.

    \b
    Register it with a host, e.g. in Claude Desktop's claude_desktop_config.json:
      {"mcpServers": {"memory": {
         "command": "/path/to/.venv/bin/mnemo",
         "args": ["--repo", "/path/to/agent.mnemo", "mcp", "--author", "claude"]}}}
    """  # noqa: D301 (\b keeps Click from rewrapping the example)
    settings = state(ctx)
    try:
        from mnemosyne.integrations.mcp_server import build_server
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in {"mcp", "mcp_types", "pydantic", "typing_extensions"}:
            raise
        raise InvalidInput(
            f"mnemo mcp needs the 'mcp' extra ({error.name} is missing): pip install 'mnemosyne[mcp]'"
        ) from None
    repo = settings.open(ctx, readonly="auto", embeds=True)
    if repo.readonly:
        # stderr is the host's log: the one place a user looks for why remember is missing.
        note(f"warning: {repo.store.where} is read-only here: serving the reading tools only")
    server = build_server(
        repo,
        branch=branch,
        author=author or None,
        fallback_author=author_or_default(None),
        allow_erase=allow_erase,
    )
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
