"""Fit the hybrid ranking's logistic model on LoCoMo-format conversations, cross-validated.

Builds one store per conversation as ``quality.py`` does, reads each question's lexical
and semantic rankings through the public API to the depth a top-25 hybrid search reads
(100), and turns them into the features :mod:`mnemosyne.recall.ranker` weighs, with the
product's own code. A candidate is labelled by whether it is one of the question's
evidence turns. It then reports evidence recall@5/10/25 of the model fitted on every
conversation but one and tested on that one (so each figure is of a conversation the
weights never saw, ranked in the ranker's two passes), and prints the weights of both
passes fitted on all of them, to paste into ``mnemosyne/recall/ranker.py``. Usage:

    python bench/fit_ranking.py [--data DIR] [--l2 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from locomo import load_all, memory_id
from quality import DEFAULT_DATA, KS, build

from mnemosyne.recall.fusion import scaled
from mnemosyne.recall.ranker import CONTEXT, FEATURES, READ_TEXTS, features

DEPTH = 100
"""How deep a hybrid search of the top 25 reads each ranking (``max(4 * k, 50)``)."""


def gather(data: Path) -> list[tuple[int, int, np.ndarray, np.ndarray, int]]:
    """Per question: (conversation, category, features, labels, number of evidence turns)."""
    rows: list[tuple[int, int, np.ndarray, np.ndarray, int]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-fit-") as tmp:
        for number, conv in enumerate(load_all(data)):
            repo, _ = build(conv, Path(tmp))
            try:
                by_dia = {t.dia_id: memory_id(t) for t in conv.turns}
                for q in conv.questions:
                    evidence = {by_dia[e] for e in q.evidence}
                    lexical = repo.search(q.text, k=DEPTH, mode="lexical")
                    semantic = repo.search(q.text, k=DEPTH, mode="semantic")
                    texts = {bytes.fromhex(h.hash): h.node for h in lexical + semantic}
                    candidates = scaled(
                        [(bytes.fromhex(h.hash), h.id, h.score) for h in lexical],
                        [(bytes.fromhex(h.hash), h.id, h.score) for h in semantic],
                    )
                    table = features(candidates, DEPTH, texts.get, q.text)
                    labels = np.array([c.id in evidence for c in candidates], dtype=float)
                    rows.append((number, q.category, np.array(table), labels, len(evidence)))
                print(f"{conv.name}: {len(conv.questions)} questions", file=sys.stderr, flush=True)
            finally:
                repo.close()
    return rows


def fit(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """Logistic regression by Newton's method, L2 on the standardised weights; raw-scale weights back."""
    mean, spread = x.mean(0), x.std(0) + 1e-12
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / spread])
    w = np.zeros(z.shape[1])
    penalty = np.eye(len(w)) * l2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        step = np.linalg.solve((z * (p * (1 - p))[:, None]).T @ z + penalty, z.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    weights = w[1:] / spread
    return float(w[0] - (w[1:] * mean / spread).sum()), weights


def two_pass(table: np.ndarray, first: tuple[float, np.ndarray], full: tuple[float, np.ndarray], read: int) -> np.ndarray:
    """The order :func:`mnemosyne.recall.ranker.rank` gives: the first pass, then its best re-weighed."""
    order = np.argsort(-(table[:, : len(CONTEXT)] @ first[1]), kind="stable")
    chosen = order[:read]
    chosen = chosen[np.argsort(-(table[chosen] @ full[1]), kind="stable")]
    return np.concatenate([chosen, order[read:]])


def fitted(rows: list[tuple[int, int, np.ndarray, np.ndarray, int]], l2: float) -> tuple[tuple[float, np.ndarray], ...]:
    """The first pass's model (over the context features) and the full one, fitted on ``rows``."""
    table, labels = np.vstack([r[2] for r in rows]), np.concatenate([r[3] for r in rows])
    return fit(table[:, : len(CONTEXT)], labels, l2), fit(table, labels, l2)


def show(name: str, names: tuple[str, ...], model: tuple[float, np.ndarray]) -> None:
    print(f"{name} = (")
    for feature, weight in zip(names, model[1], strict=True):
        print(f"    {weight:.4f},  # {feature}")
    print(")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--l2", type=float, default=10.0)
    args = parser.parse_args()
    if not args.data.is_dir():
        sys.exit(f"fit_ranking: no conversations at {args.data} (give --data DIR)")
    rows = gather(args.data)
    read = max(READ_TEXTS, 2 * max(KS))  # what a search for the top 25 reads
    recall: dict[int, list[float]] = {k: [] for k in KS}
    by_category: dict[int, list[float]] = {}
    for held in sorted({r[0] for r in rows}):
        first, full = fitted([r for r in rows if r[0] != held], args.l2)
        for _, category, table, labels, evidence in (r for r in rows if r[0] == held):
            order = two_pass(table, first, full, read)
            for k in KS:
                found = labels[order[:k]].sum() / evidence
                recall[k].append(found)
                if k == 10:
                    by_category.setdefault(category, []).append(found)
    print("held-out conversations: " + " ".join(f"R@{k} {np.mean(recall[k]):.3f}" for k in KS)
          + " | R@10 by category " + " ".join(f"{c}: {np.mean(v):.3f}" for c, v in sorted(by_category.items())))
    first, full = fitted(rows, args.l2)
    show("FIRST_WEIGHTS", CONTEXT, first)
    print(f"FIRST_INTERCEPT = {first[0]:.4f}")
    show("WEIGHTS", FEATURES, full)
    print(f"INTERCEPT = {full[0]:.4f}")


if __name__ == "__main__":
    main()
