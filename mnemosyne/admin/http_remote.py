"""A served store's tenant as the other side of a transfer: the steps of :mod:`.transfer` over HTTP.

:class:`HttpRemote` is both a :class:`~mnemosyne.admin.transfer.Sender` (a
fetch from it) and a :class:`~mnemosyne.admin.transfer.Destination` (a push to
it); each method is one request, or a few when what it carries is large, so a
transfer takes a few round trips besides its objects, which travel in batches of
a few megabytes. The token goes in an ``Authorization`` header, never in a URL;
the server answers the steps with :meth:`mnemosyne.Repo.answer_transfer`
(:mod:`.wire` names them). Errors come back as the library's errors, named by
the server's error bodies, with the remote's name in front. Needs ``httpx``
(``pip install 'mnemosyne[client]'``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import quote

import httpx
import msgspec

from mnemosyne.admin import wire
from mnemosyne.admin.receiving import Objects
from mnemosyne.admin.transfer import BATCH, QUESTION, Offer, Survey
from mnemosyne.errors import (
    CorruptObject,
    InvalidInput,
    MnemoError,
    NotFound,
    RefConflict,
    error_class,
)
from mnemosyne.model.access import Token
from mnemosyne.model.reports import RefUpdate
from mnemosyne.model.version import VERSION

BODY_LIMIT = 4 << 20
"""Bytes of objects one ``store`` request carries, at most (``mnemo serve`` takes 8M by default)."""

MAX_BODY = "x-mnemo-max-body"
"""The header a served store says its request body limit in (``mnemo serve --max-body``)."""

_ID_BYTES = 40
"""What an id costs in a request body, at most (32 bytes and msgpack's framing)."""

STORING = 3
"""``store`` requests sent ahead at most (their bodies held here): the server stores them
one after another while this process plans and reads what comes next."""

FINISH = 20_000
"""Commits one ``finish`` request indexes, at most (the last one moves the branch)."""

ANOTHER_TOKEN = (
    "to send another token, give the command --token-file PATH (a file holding it; in Python, "
    "token_file= or token=)"
)
"""What a refusal for want of rights adds: how to send a token with the rights, once."""

TIMEOUT = httpx.Timeout(600.0, connect=15.0)
"""A step may index thousands of commits: minutes, not the seconds a connection may take."""


class HttpRemote:
    """One tenant of a served store, reached with a token: the other side of a fetch or a push.

    Args:
        url: where ``mnemo serve`` listens (``http://127.0.0.1:7777``; a path
            before ``/v1`` is kept, for a server behind a reverse proxy).
        token: the token; it names the tenant and the role (fetch needs read,
            push write, and admin when the push carries erasures).
        name: the remote's name here, for messages.
        transport: an httpx transport (for tests).

    Raises:
        NotFound: nothing answers at ``url``.
        AccessDenied: the server does not honour the token.
    """

    def __init__(
        self, url: str, token: str, *, name: str, transport: httpx.BaseTransport | None = None
    ) -> None:
        token = token.strip() if isinstance(token, str) else ""
        if not token:
            raise InvalidInput(f"remote {name!r}: the token is empty")
        if not (token.isascii() and token.isprintable()) or " " in token:
            # Never shown: a message is printed, and this may be most of a secret.
            raise InvalidInput(f"remote {name!r}: the token is malformed (printable ASCII without spaces)")
        self.url = url.rstrip("/")
        self.name = name
        self.max_body = 8 << 20  # until the server says
        self._storing: deque[Future[wire.Counts]] = deque()
        """The ``store`` requests under way and queued, in order (see :meth:`store`)."""
        self._sending: ThreadPoolExecutor | None = None
        self._refused = False
        """A ``store`` request failed: those queued after it are not sent (nor any later)."""
        self._http = httpx.Client(
            base_url=self.url,
            headers={"authorization": f"Bearer {token}", "user-agent": f"mnemo/{VERSION}"},
            timeout=TIMEOUT,
            transport=transport,
            # Certificates are loaded for https only: loading them costs ~50 ms per client,
            # which was most of a no-op fetch over http.
            verify=self.url.lower().startswith("https://"),
        )
        try:
            answer = self._send("GET", "/v1/whoami", None, "whoami")
            try:
                self.token = msgspec.json.decode(answer, type=Token)
            except msgspec.MsgspecError:
                raise MnemoError(
                    f"remote {name!r}: {self.url} does not answer as mnemo serve does (the URL it printed?)"
                ) from None
        except BaseException:
            self._http.close()
            raise
        self._steps = f"/v1/tenants/{quote(self.token.tenant, safe='')}/transfer/"

    @property
    def tenant(self) -> str:
        """The tenant the token reaches."""
        return self.token.tenant

    def close(self) -> None:
        """Release the connections (after the request under way, if any, is answered)."""
        if self._sending is not None:
            self._sending.shutdown(wait=True, cancel_futures=True)
            self._sending = None
        self._storing.clear()
        self._http.close()

    # -- requests ----------------------------------------------------------------------

    def _send(self, method: str, path: str, body: bytes | None, step: str) -> bytes:
        headers = {"content-type": wire.MEDIA_TYPE} if body is not None else {}
        where = f"remote {self.name!r} ({self.url})"
        try:
            response = self._http.request(method, path, content=body, headers=headers)
        except httpx.ConnectError as error:
            raise NotFound(f"cannot reach {where}: {error}") from None
        except httpx.TimeoutException:
            raise MnemoError(f"{where} did not answer in time ({step})") from None
        except httpx.HTTPError as error:  # a connection broken part-way, a header httpx refuses, ...
            raise MnemoError(f"{where}: {step} failed: {type(error).__name__}: {error}") from None
        if response.status_code >= 400:
            raise self._error(response, step)
        limit = response.headers.get(MAX_BODY, "")
        if limit.isdigit() and int(limit) > 0:
            self.max_body = int(limit)
        return response.content

    def _parts(self, ids: list[bytes]) -> Iterator[list[bytes]]:
        """``ids`` in lists each request body can hold."""
        size = max(1, min(QUESTION, (self.max_body - 4096) // _ID_BYTES))
        for start in range(0, len(ids), size):
            yield ids[start : start + size]

    def _error(self, response: httpx.Response, step: str) -> MnemoError:
        """The library error an error response carries, its message naming the remote."""
        status = response.status_code
        try:
            error = msgspec.json.decode(response.content)["error"]
            kind = error_class(error["kind"])
            message = str(error["message"])
        except (msgspec.DecodeError, KeyError, TypeError):
            kind = NotFound if status == 404 else MnemoError
            message = f"HTTP {status} from {self.url}"
        if status == 404 and message.startswith("no such route"):
            message = (
                f"{self.url} serves no transfer routes: give the URL 'mnemo serve' printed, without /v1, "
                "of a server that serves remotes"
            )
        elif status == 403 and step == "redact":
            message = (
                "this push carries erasures the remote lacks (redaction records of forgotten versions), "
                f"and erasing there needs an admin token: {message}"
            )
        elif status == 412:
            kind = RefConflict
        if status in (401, 403):
            # Refused for want of rights: say how to send another token for this command alone.
            message = f"{message.rstrip('.')}; {ANOTHER_TOKEN}"
        return kind(f"remote {self.name!r}: {message}")

    def _step(self, step: str, message: msgspec.Struct, answer: type[wire.M]) -> wire.M:
        return self._answer(step, wire.encode(message), answer)

    def _answer(self, step: str, body: bytes, answer: type[wire.M]) -> wire.M:
        data = self._send("POST", self._steps + step, body, step)
        try:
            return wire.decode(data, answer, f"the answer to {step}")
        except InvalidInput as error:
            raise MnemoError(f"remote {self.name!r}: {error}") from None

    # -- as a sender (fetch) -----------------------------------------------------------

    def offer(self, tips: list[bytes] | None, have: list[bytes], erased: frozenset[bytes]) -> Offer:
        """The server's branches, the candidate commits and the redaction records this side lacks."""
        answer = self._step(
            "offer", wire.Want(tips=tips, have=have, erased=sorted(erased)), wire.OfferMessage
        )
        return Offer(
            head=answer.head,
            branches=list(answer.branches),
            commits=[(oid, tuple(parents)) for oid, parents in answer.commits],
            redactions=list(answer.redactions),
        )

    def objects(self, commits: list[bytes]) -> list[bytes]:
        """Ids of the objects ``commits`` add, children first (asked in parts, each id once)."""
        found: dict[bytes, None] = {}
        for part in self._parts(commits):
            found.update(dict.fromkeys(self._step("plan", wire.Plan(commits=part), wire.Ids).ids))
        return list(found)

    def read(self, ids: list[bytes]) -> Iterator[Objects]:
        """The objects of ``ids``: a part per answer, each of a few megabytes.

        The next part is asked for, from a thread of its own, while the caller
        stores this one: the server reads it meanwhile.

        Raises:
            NotFound: a version was erased there since it was offered (a rerun
                brings its erasure first).
        """
        if not ids:
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-read") as reading:
            ahead = reading.submit(self._read_part, ids)
            while True:
                part, rest = ahead.result()
                if rest:
                    ahead = reading.submit(self._read_part, rest)
                yield part
                if not rest:
                    return

    def _read_part(self, ids: list[bytes]) -> tuple[list[tuple[bytes, bytes | None]], list[bytes]]:
        """The first objects of ``ids`` one answer holds, and the ids left to ask for."""
        batch = self._step("read", wire.Ids(ids=next(self._parts(ids))), wire.ObjectBatch)
        count = len(batch.ids)
        if not count or batch.ids != ids[:count] or len(batch.data) != count:
            raise MnemoError(f"remote {self.name!r} answered other objects than those asked for")
        if batch.erased:
            raise NotFound(
                f"remote {self.name!r}: {len(batch.erased)} version(s) were erased there during the "
                f"transfer (e.g. {batch.erased[0].hex()[:12]}); run it again: the erasure comes first"
            )
        return list(zip(batch.ids, batch.data, strict=True)), ids[count:]

    # -- as a destination (push) -------------------------------------------------------

    def survey(self) -> Survey:
        """The server's tips and erased versions."""
        answer = self._step("survey", wire.Empty(), wire.SurveyMessage)
        return Survey(tips=list(answer.tips), erased=frozenset(answer.erased))

    def lacking_commits(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` the server has not indexed."""
        found: set[bytes] = set()
        for part in self._parts(ids):
            found.update(self._step("lacking", wire.Lacking(commits=part), wire.Lacking).commits)
        return found

    def lacking(self, ids: list[bytes]) -> set[bytes]:
        """Those of ``ids`` the server does not store."""
        found: set[bytes] = set()
        for part in self._parts(ids):
            found.update(self._step("lacking", wire.Lacking(objects=part), wire.Lacking).objects)
        return found

    def redact(self, records: list[tuple[bytes, bytes]]) -> int:
        """Apply redaction records there first (an admin token's right)."""
        return self._step("redact", wire.Records(records=records), wire.Counts).redactions

    def store(self, objects: Objects) -> tuple[int, int]:
        """Send objects in requests of at most :data:`BODY_LIMIT` bytes, each one transaction there.

        The requests go from a thread of their own, in order, one at a time; up to
        :data:`STORING` of them may still be under way when this returns, so the
        server stores them while this process reads and plans what comes next.
        :meth:`flush` (or a later call) waits for their answers and raises the
        first error one carries (the requests after it are not sent).

        Returns:
            ``(objects written, bytes)`` of the requests answered during this call.

        Raises:
            InvalidInput: an object larger than the server takes in a request.
        """
        budget = min(BODY_LIMIT, self.max_body * 3 // 4)
        written = size = 0
        ids: list[bytes] = []
        data: list[bytes | None] = []
        held = 0

        def send() -> None:
            nonlocal written, size, held, ids, data
            body = wire.encode(wire.ObjectBatch(ids=ids, data=data))
            while len(self._storing) >= STORING:
                counts = self._stored()
                written += counts.objects
                size += counts.bytes
            if self._sending is None:
                self._sending = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-store")
            self._storing.append(self._sending.submit(self._store_part, body))
            ids, data = [], []
            held = 0

        for oid, raw in objects:
            if raw is None:
                raise CorruptObject(f"{oid.hex()} is missing from the sending store (run 'mnemo fsck' there)")
            if len(raw) + 4096 > self.max_body:
                raise InvalidInput(
                    f"remote {self.name!r} takes request bodies of {self.max_body:,} bytes at most, and "
                    f"object {oid.hex()[:12]} is {len(raw):,}: start its server with a larger --max-body"
                )
            if ids and (held + len(raw) > budget or len(ids) >= BATCH):
                send()
            ids.append(oid)
            data.append(raw)
            held += len(raw)
        if ids:
            send()
        return written, size

    def flush(self) -> tuple[int, int]:
        """Wait for the ``store`` requests under way; ``(objects written, bytes)`` they report.

        Raises:
            MnemoError: as the first failed request's answer says (those after it are not sent).
        """
        written = size = 0
        while self._storing:
            counts = self._stored()
            written += counts.objects
            size += counts.bytes
        return written, size

    def _store_part(self, body: bytes) -> wire.Counts:
        """One ``store`` request, in the sending thread; none once one failed (a transfer ends there)."""
        if self._refused:
            raise MnemoError(f"remote {self.name!r}: objects not sent, as an earlier batch failed")
        try:
            return self._answer("store", body, wire.Counts)
        except BaseException:
            self._refused = True
            raise

    def _stored(self) -> wire.Counts:
        """The answer to the oldest ``store`` request under way; on an error, the rest are dropped."""
        try:
            return self._storing.popleft().result()
        except BaseException:
            for later in self._storing:
                later.cancel()  # not sent: a store after a failed one would only be wasted
            self._storing.clear()
            raise

    def finish(self, commits: list[bytes], move: wire.Move) -> tuple[int, RefUpdate | None]:
        """Index ``commits`` there, in parts, then move the branch by compare-and-swap."""
        self.flush()  # every object is stored before the commits naming them are indexed
        indexed = 0
        start = 0
        step = max(1, min(FINISH, (self.max_body - 4096) // _ID_BYTES))
        while True:
            part = commits[start : start + step]
            start += step
            last = start >= len(commits)
            answer = self._step(
                "finish", wire.Finish(commits=part, move=move if last else None), wire.Finished
            )
            indexed += answer.commits
            if last:
                return indexed, answer.ref
