"""What a damaged store gives, for test_page_damage.py, run as a process of its own.

``python -m support.damage_probe STORE [DAMAGE ...]`` opens the store at
STORE read-only and prints one JSON line: the verdict of ``fsck`` (or the
error that refused the store), what an export and a semantic search give.
With DAMAGE arguments (``zero:PAGE``, a 4 KiB page zeroed, or ``flip:OFFSET:BIT``,
one bit of the data file flipped), each is done before a probe and undone after
it: one line each. A probe that ends in a signal is the crash the test looks for.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys

from mnemosyne import MnemoError, Repo

QUERY = "word 7"
PAGE = 4096


def probe(path: str) -> dict[str, object]:
    """The verdict on the store at ``path``: fsck's, and what reads give when it says ok."""
    try:
        with Repo.open(path, readonly=True, embedder="hash") as repo:
            report = repo.fsck()
            if not report.ok:
                return {"fsck": "problems", "problems": [p.message for p in report.problems]}
            out = io.BytesIO()
            repo.store.export(out)
            hits = [(hit.id, round(hit.score, 9)) for hit in repo.search(QUERY, mode="semantic", k=10)]
            return {
                "fsck": "ok",
                "export": hashlib.sha256(out.getvalue()).hexdigest(),
                "log": [commit.id for commit in repo.log()],
                "search": hits,
            }
    except MnemoError as exc:
        return {"fsck": "refused", "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    path = sys.argv[1]
    if len(sys.argv) == 2:
        print(json.dumps(probe(path)), flush=True)
        return
    handle = os.open(os.path.join(path, "data.mdb"), os.O_RDWR)
    try:
        for damage in sys.argv[2:]:
            kind, *numbers = damage.split(":")
            offset = int(numbers[0]) * PAGE if kind == "zero" else int(numbers[0])
            before = os.pread(handle, PAGE if kind == "zero" else 1, offset)
            after = bytes(PAGE) if kind == "zero" else bytes([before[0] ^ 1 << int(numbers[1])])
            os.pwrite(handle, after, offset)
            verdict = probe(path)
            os.pwrite(handle, before, offset)
            print(json.dumps({"damage": damage, **verdict}), flush=True)
    finally:
        os.close(handle)


if __name__ == "__main__":
    main()
