"""``mnemo`` as installed, knowing one more embedder name: ``synthetic-384`` (see synthetic.py).

The recall benches time ``mnemo search`` and ``mnemo context`` as whole processes
on stores whose vectors are synthetic: ``MNEMO_EMBEDDER=synthetic-384 python
bench/synthetic_mnemo.py --repo STORE search "..."``. Everything else is the
real command line.
"""

from __future__ import annotations

import sys

from synthetic import Synthetic

import mnemosyne.recall.embedders as embedders

_named = embedders.embedder_named


def named(name: str) -> embedders.Embedder | None:
    return Synthetic() if name == Synthetic.model_id else _named(name)


embedders.embedder_named = named  # type: ignore[assignment]

from mnemo_cli.app import main  # noqa: E402  (after the embedder is known)

if __name__ == "__main__":
    sys.exit(main())
