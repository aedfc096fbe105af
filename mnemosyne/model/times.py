"""Times: the one parser of time text, the one conversion to microseconds, RFC 3339 out.

Every datetime the store keeps is timezone-aware and in UTC. Where a caller may
give a time (``as_of``, ``valid_at``), a datetime or RFC 3339 text is accepted,
through :func:`as_time`, so Python and the command line read times alike.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from mnemosyne.errors import InvalidInput

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

TimeLike = datetime | str
"""A time as a caller may give it: a timezone-aware datetime, or RFC 3339 text."""


def micros(when: datetime) -> int:
    """Microseconds since the epoch: exact, and sorts as time does."""
    return (when - EPOCH) // MICROSECOND


def from_micros(value: int) -> datetime:
    """The UTC datetime ``value`` microseconds after the epoch."""
    return EPOCH + value * MICROSECOND


def rfc3339(when: datetime) -> str:
    """``when`` as RFC 3339 in UTC with a ``Z``, as messages and JSON show times."""
    text = when.astimezone(UTC).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time; a bare date means midnight UTC.

    Raises:
        InvalidInput: if ``text`` is not such a time.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"a time must be RFC 3339 text, not {type(text).__name__}")
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"{text!r} is not an RFC 3339 time (e.g. 2026-06-04T00:00:00Z)") from None
    if value.tzinfo is None:
        if len(text.strip()) == 10:
            return value.replace(tzinfo=UTC)
        raise InvalidInput(f"time {text!r} has no timezone; add Z for UTC")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the last datetime
        raise InvalidInput(f"time {text!r} is out of range once converted to UTC") from None


def utc(value: datetime | None, what: str) -> datetime | None:
    """Return ``value`` converted to UTC; refuse naive datetimes and anything else.

    Raises:
        InvalidInput: if ``value`` is not a datetime or carries no timezone.
    """
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{what} is a naive datetime; give a timezone (UTC is usual)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(f"{what} is out of range once converted to UTC") from None


def as_time(value: TimeLike | None, what: str) -> datetime | None:
    """A time argument as a UTC datetime: a timezone-aware datetime, or RFC 3339 text.

    Raises:
        InvalidInput: naming ``what``, for text that does not parse, a naive
            datetime, or anything else.
    """
    if value is None or isinstance(value, datetime):
        return utc(value, what)
    if isinstance(value, str):
        try:
            return parse_time(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{what}: {exc}") from None
    raise InvalidInput(f"{what} must be a datetime or RFC 3339 text, not {type(value).__name__}")


_DURATION = re.compile(r"(\d+)([wdhms])")
_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_duration(text: str, what: str = "duration") -> timedelta:
    """A duration such as ``14d``, ``12h``, ``30m``, ``0s`` or ``1d12h``.

    Units: ``w`` weeks, ``d`` days, ``h`` hours, ``m`` minutes, ``s`` seconds.

    Raises:
        InvalidInput: anything else (the message names ``what``).
    """
    parts = _DURATION.findall(text) if isinstance(text, str) else []
    if not text or "".join(number + unit for number, unit in parts) != text:
        raise InvalidInput(f"{what}: {text!r} is not a duration (use e.g. 14d, 12h, 30m, 0s or 1d12h)")
    total = timedelta()
    try:
        for number, unit in parts:
            total += timedelta(**{_UNITS[unit]: int(number)})
    except OverflowError:
        raise InvalidInput(f"{what}: {text!r} is too long a duration") from None
    return total
