"""How the MCP server speaks the protocol: strict arguments, one-line errors, no prompts.

The SDK's server as :mod:`mnemosyne.integrations.mcp_server` needs it: a tool
refuses an argument it does not take (the SDK would ignore it), every error a
tool or a resource read raises reaches the host as one line (never a traceback,
never the value given: memories can hold secrets), and the server advertises no
prompts (the SDK would, with none to offer). Nothing here knows the store.
"""

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, ToolAnnotations
from pydantic import ValidationError

from mnemosyne import MnemoError, NotFound, __version__
from mnemosyne.errors import one_line
from mnemosyne.integrations.mcp_stdio import checked_stdio


@contextmanager
def reported() -> Iterator[None]:
    """Turn what a tool raises into a tool error with one line of text; the server keeps serving.

    A :class:`MnemoError` keeps its own message; anything else is named by its class,
    as the command line does. Never a traceback: memories can hold secrets.
    """
    try:
        yield
    except ToolError:
        raise
    except MnemoError as error:
        raise ToolError(one_line(error)) from None
    except Exception as error:
        raise ToolError(f"{type(error).__name__}: {one_line(error)}") from None


@contextmanager
def resource_reported() -> Iterator[None]:
    """As :func:`reported`, for a resource read: a protocol error of one line, not a crash.

    ``NotFound`` is the SDK's "resource not found" (invalid params); anything else
    a resource error. Either way the SDK neither logs a traceback nor hides the message.
    """
    try:
        yield
    except NotFound as error:
        raise ResourceNotFoundError(one_line(error)) from None
    except MnemoError as error:
        raise ResourceError(one_line(error)) from None
    except Exception as error:
        raise ResourceError(f"{type(error).__name__}: {one_line(error)}") from None


def strict(fn: Callable[..., Any], name: str, annotations: ToolAnnotations) -> Tool:
    """A tool whose published input schema allows no argument it does not name.

    The SDK ignores arguments a tool does not take; :class:`OneLineServer` refuses
    them, and the schema says so to hosts that check arguments before sending them.
    """
    tool = Tool.from_function(fn, name=name, annotations=annotations)
    tool.parameters["additionalProperties"] = False
    return tool


def unknown_arguments(tool: str, unknown: Sequence[str], accepted: Sequence[str]) -> str:
    """The one line that refuses arguments a tool does not take, and names those it does."""
    # repr: a name is the caller's text, and may hold a newline.
    named = ", ".join(repr(key) for key in unknown)
    noun = "argument" if len(unknown) == 1 else "arguments"
    return f"unknown {noun} {named} ({tool} takes {', '.join(accepted)})"


_PROMPT_METHODS = frozenset({"prompts/list", "prompts/get"})
_CAPABILITY_RESULTS = frozenset({"initialize", "server/discover"})


async def without_prompts(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Offer no prompts and advertise none: the SDK's server would advertise prompts it does not have.

    A host that sees the ``prompts`` capability lists prompts and shows an empty
    menu; without it, the host knows there are none. The prompt methods answer
    "method not found", as for any server without them.
    """
    if ctx.method in _PROMPT_METHODS:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    result = await call_next(ctx)
    if ctx.method in _CAPABILITY_RESULTS and isinstance(result, dict):
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict) and "prompts" in capabilities:
            kept = {key: value for key, value in capabilities.items() if key != "prompts"}
            result = {**result, "capabilities": kept}
    return result


class OneLineServer(MCPServer):
    """The SDK's server, refusing unknown arguments and reporting bad ones on one line.

    The SDK ignores an argument a tool does not take (a misnamed ``budget`` would
    leave ``budget_tokens`` at its default without a word): here it is refused,
    naming the argument and the ones the tool takes. The SDK checks the rest before
    a tool runs and reports pydantic's error: several lines, quoting the value given
    (which may be a memory). Here it is one line per field that failed, naming the
    field and the rule, never the value.
    """

    def __init__(self, *, instructions: str, tools: list[Tool]) -> None:
        # The SDK logs each tool error's text at INFO on stderr, and that text may quote a
        # memory: the host's log gets warnings only (the client has the error itself).
        super().__init__(
            "mnemosyne",
            version=__version__,
            instructions=instructions,
            log_level="WARNING",
            tools=tools,
            middleware=[without_prompts],
        )
        self.arguments = {tool.name: tuple(tool.parameters.get("properties", {})) for tool in tools}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call a tool; an unknown argument, or one that fails validation, is a one-line tool error."""
        accepted = self.arguments.get(name)
        unknown = [key for key in arguments if key not in accepted] if accepted is not None else []
        if accepted is not None and unknown:
            problem = unknown_arguments(name, unknown, accepted)
            raise ToolError(f"Error executing tool {name}: bad arguments: {problem}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(part) for part in issue['loc']) or 'arguments'}: {issue['msg']}"
                for issue in cause.errors(include_url=False, include_input=False)
            )
            raise ToolError(f"Error executing tool {name}: bad arguments: {problems}") from None

    async def run_stdio_async(self) -> None:
        """Serve over stdio as the SDK does, reading each line through :func:`checked_stdio`.

        Bounded lines, and an answer to every line that cannot be a message
        (the SDK would read without end, and drop such a line unanswered).
        """
        lowlevel = self._lowlevel_server  # what the SDK's own run_stdio_async runs
        async with checked_stdio() as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
