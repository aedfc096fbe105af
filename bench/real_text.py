"""The approximate index on real text embeddings, beside an inverted file: ADR 83's check.

``bench/recall_large.py`` measures recall at a million memories on synthetic
vectors, each text near one of 1,000 centres: tighter clusters than real text
has, which flatters any index that partitions space. This script measures on
real English instead, at the size one machine embeds in minutes:

- passages of 5-80 words found on this machine (Python docstrings, package
  descriptions, ``/usr/share/doc``, npm READMEs), deduplicated, shuffled;
- embedded with the product's MiniLM; ``QUESTIONS`` of them held out, asked
  two ways: each one's own vector, and its first 4-6 words embedded;
- exact float32 top 10 as the truth;
- the product's HNSW graph (``approximate.new_graph``: its parameters), 64
  proposals rescored exactly, as a search does;
- an inverted file in numpy (spherical k-means of √n centres on every row, the
  rows of the ``P`` lists nearest a question scored by the product's int8
  codes, the best 64 rescored exactly), for several ``P``.

Rows: recall@10 of each, the rows each scores per question, and build rates
(one run each; times depend on the machine, recall does not).

    python bench/real_text.py [--passages 20000]

Not part of ``make bench``: embedding is most of its time (about 150 passages/s
on two cores).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import os
import random
import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
from harness import row

from mnemosyne.recall.approximate import new_graph, quantised, rough
from mnemosyne.recall.minilm import MiniLmEmbedder

QUESTIONS = 300
PROPOSED = 64
"""What a top-10 search asks the index for (``max(64, 2 * k)``), then rescores exactly."""
PROBES = (4, 16, 32, 64)
ROUNDS = 8
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z]{2,}")
_TEXTY = re.compile(r"(README|METADATA|DESCRIPTION|NEWS|changelog|\.md|\.rst|\.txt)(\.gz)?$", re.I)

Vectors = npt.NDArray[np.float32]


def _pieces(text: str) -> Iterator[str]:
    """Paragraphs of 5-80 words, mostly words (a longer one in groups of its sentences)."""
    for paragraph in re.split(r"\n\s*\n", text):
        flat = _SPACE.sub(" ", re.sub(r"^[#>*\-\s]+", "", paragraph, flags=re.M)).strip()
        words = flat.split(" ")
        groups = [words]
        if len(words) > 80:
            groups, group = [], []
            for sentence in re.split(r"(?<=[.!?])\s+", flat):
                said = sentence.split(" ")
                if len(group) + len(said) > 80 and group:
                    groups.append(group)
                    group = []
                group += said if len(said) <= 80 else []
            groups.append(group)
        for group in groups:
            wordy = sum(1 for word in group if _WORD.fullmatch(word.strip(".,;:()'\"`!?")))
            if 5 <= len(group) <= 80 and wordy >= 0.6 * len(group):
                yield " ".join(group)


def _read(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", errors="replace") as text:
                return text.read(2_000_000)
        return path.read_text(errors="replace")[:2_000_000]
    except (OSError, EOFError, ValueError):
        return ""


def _docstrings(path: Path) -> str:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return ""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node)
            if text and ">>>" not in text:
                found.append(text)
    return "\n\n".join(found)


def passages(wanted: int) -> list[str]:
    """Distinct passages of real English from this machine's documentation, shuffled."""
    import sysconfig

    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    roots += [Path("/usr/share/doc"), Path("/usr/lib/node_modules")]
    seen: set[str] = set()
    out: list[str] = []
    for root in roots:
        for directory, dirs, files in os.walk(root):
            dirs.sort()
            if "/test" in directory and "/usr/share/doc" not in directory:
                continue
            for name in sorted(files):
                path = Path(directory, name)
                if name.endswith(".py"):
                    text = _docstrings(path)
                elif _TEXTY.search(name) and not re.search("copyright|license", name, re.I):
                    text = _read(path)
                else:
                    continue
                for piece in _pieces(text):
                    if piece.lower() not in seen:
                        seen.add(piece.lower())
                        out.append(piece)
    random.Random(7).shuffle(out)
    return out[:wanted]


def _truth(base: Vectors, questions: Vectors) -> npt.NDArray[np.intp]:
    scores = questions @ base.T
    return np.argsort(-scores, axis=1)[:, :10]


def _recall(found: list[npt.NDArray[np.intp]], truth: npt.NDArray[np.intp]) -> float:
    return float(
        np.mean([len(set(f.tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth, strict=True)])
    )


def _rescored(base: Vectors, rows: npt.NDArray[np.intp], question: Vectors) -> npt.NDArray[np.intp]:
    scores = base[rows] @ question
    return rows[np.argsort(-scores)[:10]]


def _centres(base: Vectors, count: int) -> tuple[Vectors, npt.NDArray[np.intp]]:
    """Spherical k-means: ``count`` unit centres and each row's nearest."""
    rng = np.random.default_rng(0)
    centres = base[rng.choice(len(base), count, replace=False)].copy()
    for _ in range(ROUNDS):
        nearest = np.argmax(base @ centres.T, axis=1)
        sums = np.zeros_like(centres)
        np.add.at(sums, nearest, base)
        empty = ~sums.any(axis=1)
        sums[empty] = base[rng.choice(len(base), int(empty.sum()))]
        centres = (sums / np.linalg.norm(sums, axis=1, keepdims=True)).astype(np.float32)
    return centres, np.argmax(base @ centres.T, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passages", type=int, default=20_000)
    args = parser.parse_args()
    texts = passages(args.passages + QUESTIONS)
    embedder = MiniLmEmbedder()
    started = time.perf_counter()
    vectors = np.asarray(embedder(texts), dtype=np.float32)
    shorts = [" ".join(text.split()[: 4 + i % 3]) for i, text in enumerate(texts[-QUESTIONS:])]
    short = np.asarray(embedder(shorts), dtype=np.float32)
    embedded = time.perf_counter() - started
    base = np.ascontiguousarray(vectors[:-QUESTIONS])
    n = len(base)
    asked = {"own vector": vectors[-QUESTIONS:], "first 4-6 words": short}
    truth = {name: _truth(base, questions) for name, questions in asked.items()}
    label = f"{n:,} passages"
    row("real text: passages embedded with MiniLM (passages/s)", label, f"{len(texts) / embedded:,.0f}")
    # Each row's best other row: the second best of its scores (the best is itself, 1.0).
    near = np.concatenate(
        [np.partition(base[s : s + 2048] @ base.T, -2, axis=1)[:, -2] for s in range(0, n, 2048)]
    )
    row(
        "real text: a row's nearest other row, cosine p1 / median",
        label,
        f"{np.percentile(near, 1):.3f} / {np.median(near):.3f}",
    )

    graph = new_graph(base.shape[1])
    started = time.perf_counter()
    for start in range(0, n, 8192):
        graph.add(np.arange(start, min(start + 8192, n), dtype=np.uint64), base[start : start + 8192])
    linked = time.perf_counter() - started
    row("real text: HNSW graph as the product builds it (vectors/s)", label, f"{n / linked:,.0f}")
    for name, questions in asked.items():
        found = []
        for question in questions:
            keys, _, counts = graph.search(question, PROPOSED)
            found.append(_rescored(base, keys[0, : int(counts[0])].astype(np.intp), question))
        row(
            f"real text: HNSW, {PROPOSED} proposed and rescored, recall@10 ({name})",
            label,
            f"{_recall(found, truth[name]):.3f}",
        )

    lists = round(np.sqrt(n))
    started = time.perf_counter()
    centres, member = _centres(base, lists)
    built = time.perf_counter() - started
    row(
        f"real text: inverted file of {lists} lists, k-means and assignment (vectors/s)",
        label,
        f"{n / built:,.0f}",
    )
    order = np.argsort(member, kind="stable")
    bounds = np.searchsorted(member[order], np.arange(lists + 1))
    codes = quantised(base)
    for probes in PROBES:
        for name, questions in asked.items():
            found, scanned = [], []
            for question in questions:
                nearest_lists = np.argsort(-(centres @ question))[:probes]
                rows = np.concatenate([order[bounds[i] : bounds[i + 1]] for i in nearest_lists])
                scores, _ = rough(codes[rows], question)
                best = rows[np.argsort(-scores)[:PROPOSED]]
                found.append(_rescored(base, best, question))
                scanned.append(len(rows))
            row(
                f"real text: inverted file, {probes} lists probed, recall@10 ({name}); rows scored a question",
                label,
                f"{_recall(found, truth[name]):.3f}; {np.mean(scanned):,.0f}",
            )


if __name__ == "__main__":
    main()
