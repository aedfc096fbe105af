"""How :class:`~mnemosyne.integrations.client.ServedRepo` talks to ``mnemo serve``: requests, answers, errors.

Requests carry the token; answers are the one JSON form (JSON Lines for
streams), decoded as asked; an error body becomes the library error it names
(``RefConflict`` for a failed ``If-Match``), and anything that is not the API (a
proxy's page, a redirect, a connection cut) one ``MnemoError`` naming the URL.

A request is sent again only where repeating it is safe, as the TypeScript
client does (ADR 66): one answered 429 or 503 with ``Retry-After`` (the
server's bounds refused it before reading it: nothing was done) after that wait,
a few times; a ``GET`` (a read: it writes nothing) also when the connection
failed before an answer came. A write whose connection failed is never
repeated: it may have been made.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from mnemosyne.errors import InvalidInput, MnemoError, NotFound, RefConflict, error_class
from mnemosyne.model.jsonform import from_builtins
from mnemosyne.model.objects import Commit
from mnemosyne.model.times import TimeLike, as_time, rfc3339

T = TypeVar("T")
Rev = str | Commit
"""A revision: its text, or a :class:`Commit`."""

_decode = msgspec.json.Decoder()

RETRIES = 3
"""How many times a request may be sent again where that is safe."""
MAX_RETRY_WAIT = 5.0
"""The longest wait (seconds) a ``Retry-After`` is followed for."""
_BUSY = frozenset({429, 503})


class Http:
    """Requests to one served store with one token; safe to share between threads."""

    def __init__(
        self, url: str, token: str, timeout: float, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url
        self._client = httpx.Client(
            base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        """Release the connections."""
        self._client.close()

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
    ) -> httpx.Response:
        """Send a request (``params``: its query; ``body``: JSON): a 2xx answer, else its error raised."""
        query = {key: _param(value) for key, value in (params or {}).items() if value is not None}
        content = msgspec.json.encode(body) if body is not None else None
        extra = dict(headers or {})
        if content is not None:
            extra["content-type"] = "application/json"
        request = self._client.build_request(method, path, params=query, content=content, headers=extra)
        for attempt in range(RETRIES + 1):
            try:
                response = self._client.send(request, stream=stream)
            except httpx.ConnectError as error:
                raise NotFound(f"cannot reach {self.url}: {error}") from None
            except httpx.TimeoutException:
                where = path.split("?")[0]
                raise MnemoError(f"{self.url} did not answer in time ({method} {where})") from None
            except httpx.HTTPError as error:
                if method == "GET" and attempt < RETRIES:
                    continue  # a read writes nothing: safe to repeat
                raise MnemoError(f"{self.url}: {type(error).__name__}: {error}") from None
            wait = _retry_after(response) if response.status_code in _BUSY and attempt < RETRIES else None
            if wait is None:
                break
            response.close()
            time.sleep(min(wait, MAX_RETRY_WAIT))
        if response.status_code >= 300:  # a redirect is not followed: the URL (or a proxy) is wrong
            if stream:
                response.read()
                response.close()
            raise_for(response)
        return response

    def json(self, method: str, path: str, cls: type[T] | Any, **kwargs: Any) -> Any:
        """The answer to a request, decoded as ``cls`` (arguments as :meth:`send`'s)."""
        return from_builtins(self.call(method, path, **kwargs), cls, "the server's answer")

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer to a request as plain JSON values (arguments as :meth:`send`'s)."""
        return self.answer(self.send(method, path, **kwargs))

    def answer(self, response: httpx.Response) -> Any:
        """A response's JSON body, decoded (``MnemoError`` when it is none: a proxy's page, say)."""
        try:
            return _decode.decode(response.content)
        except msgspec.DecodeError:
            kind = response.headers.get("content-type", "no content type")
            where = response.request.url.copy_with(query=None)
            raise MnemoError(f"{where} answered with no JSON ({kind})") from None

    def lines(self, path: str, cls: type[T], params: Mapping[str, Any]) -> Iterator[T]:
        """A JSON Lines stream of ``cls``, read as the caller iterates."""
        return Lines(self.send("GET", path, params=params, stream=True), cls)


def _retry_after(response: httpx.Response) -> float | None:
    """The seconds a busy answer's ``Retry-After`` asks to wait, or None (no header, or a date)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def raise_for(response: httpx.Response) -> None:
    """Raise the library error an error response carries."""
    try:
        error = _decode.decode(response.content)["error"]
        kind = error_class(error["kind"])
        message = str(error["message"])
    except (msgspec.DecodeError, KeyError, TypeError):
        kind = NotFound if response.status_code == 404 else MnemoError
        message = f"HTTP {response.status_code} from {response.request.url.copy_with(query=None)}"
    if response.status_code == 412:
        kind = RefConflict
    raise kind(message)


class Lines(Iterator[T]):
    """The results of a JSON Lines response, decoded as the caller iterates; closed at the end."""

    def __init__(self, response: httpx.Response, cls: type[T]) -> None:
        self._response = response
        self._lines = response.iter_lines()
        self._cls = cls

    def __next__(self) -> T:
        try:
            for line in self._lines:
                if not line:
                    continue
                try:
                    value = _decode.decode(line)
                except msgspec.DecodeError:
                    raise MnemoError(f"the server's answer is not JSON Lines: {line[:80]!r}") from None
                if isinstance(value, dict) and set(value) == {"error"}:
                    kind = error_class(value["error"].get("kind"))
                    raise kind(str(value["error"].get("message")))
                return from_builtins(value, self._cls, "the server's answer")
        except httpx.HTTPError as error:
            self.close()
            raise MnemoError(f"the server's answer was cut short: {type(error).__name__}: {error}") from None
        except BaseException:
            self.close()
            raise
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stop reading: the connection goes back to the pool."""
        self._response.close()

    def __del__(self) -> None:
        self._response.close()


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return rfc3339(value)
    return str(value)


# -- values as a request spells them ------------------------------------------------------


def rev_text(value: Rev | None) -> str | None:
    """A revision as a request spells it: its text, or a commit's id."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Commit):
        return value.id
    raise InvalidInput(f"a revision is text or a Commit, not {type(value).__name__}")


def time_text(value: TimeLike | None, what: str) -> str | None:
    """A time as a request spells it (RFC 3339), checked as the library checks it."""
    when = as_time(value, what)
    return rfc3339(when) if when is not None else None


def duration_text(value: timedelta | None) -> str | None:
    """A duration as a request spells it (whole seconds, ``90s``)."""
    if value is None:
        return None
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise InvalidInput("verified_within must be a non-negative timedelta")
    return f"{int(value.total_seconds())}s"


def path_segment(value: str, what: str) -> str:
    """Text as one segment of a request's path, every reserved character escaped."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be non-empty text")
    return quote(value, safe="")
