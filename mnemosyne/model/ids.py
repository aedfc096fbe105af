"""Generated node ids: unique and time-ordered (ULID layout)."""

from __future__ import annotations

import os
from datetime import datetime

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(when: datetime) -> str:
    """Return a fresh 26-character id that sorts by ``when`` (to the millisecond).

    48 bits of milliseconds since the epoch, then 80 random bits, in Crockford
    base 32, as a ULID.
    """
    millis = int(when.timestamp() * 1000) & ((1 << 48) - 1)
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
