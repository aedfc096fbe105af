"""Recall quality on LoCoMo-format conversations, beside the baselines a user could pick instead.

One store per conversation, built through the public API as an agent would: one
memory per turn (``"<speaker>: <text>"`` plus a shared photo's caption; event time
the session's date), one commit per session, the store's default embedder. Each
question of categories 1-4 is asked of ``search`` (hybrid, lexical, semantic) and
of ``context``; in the same run, on the same texts, the baselines rank them too:
a maintained BM25 package (bm25s, English stop words and Snowball stemming), exact
cosine with the store's own embedder and with MiniLM over whole texts (the model a
user would pick by itself), and the reciprocal-rank fusion of BM25 with each.

The measure is evidence recall@k: the share of a question's evidence turns among
the top k, averaged over questions, per category and overall. Usage:

    python bench/quality.py [--data DIR] [--out bench/results-quality.md] [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from locomo import CATEGORIES, Conversation, Question, load_all, memory_id

from mnemosyne import Node, Repo
from mnemosyne.recall.search import estimate_tokens

KS = (5, 10, 25)
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
CONTEXT_TURNS = 10
"""``context`` is given the budget of about this many turns (their median cost, cited)."""
RRF_K = 60


@dataclass
class System:
    """One ranking's answers: for each question, the memory ids in rank order."""

    name: str
    recalls: dict[int, list[float]] = field(default_factory=dict)  # k -> per question
    by_category: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def record(self, question: Question, ranked: Sequence[str], evidence_ids: frozenset[str],
               whole: bool = False) -> None:
        """Recall among the top k of ``ranked`` for each k; ``whole``: among all of it, whatever k."""
        for k in KS:
            found = len(evidence_ids & set(ranked if whole else ranked[:k])) / len(evidence_ids)
            self.recalls.setdefault(k, []).append(found)
            self.by_category.setdefault((question.category, k), []).append(found)


def ranking_of(scores: np.ndarray, ids: list[str], k: int) -> list[str]:
    top = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in top]


def rrf(*rankings: list[str]) -> list[str]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, node_id in enumerate(ranking, 1):
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(fused, key=lambda i: -fused[i])


class Baselines:
    """The rankings a user could build beside the store, over the same texts."""

    def __init__(self, texts: list[str], ids: list[str], embed: Callable[[list[str]], np.ndarray] | None):
        import bm25s
        import Stemmer

        self.ids = ids
        self.stemmer = Stemmer.Stemmer("english")
        self.bm25 = bm25s.BM25()
        self.bm25.index(bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False),
                        show_progress=False)
        self.embed = embed
        self.vectors = None
        if embed is not None:
            vectors = embed(texts).astype(np.float32)
            self.vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def lexical(self, query: str, k: int) -> list[str]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        docs, _ = self.bm25.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False)
        return [self.ids[int(i)] for i in docs[0]]

    def dense(self, query: str, k: int) -> list[str]:
        assert self.embed is not None and self.vectors is not None
        q = self.embed([query])[0].astype(np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        return ranking_of(self.vectors @ q, self.ids, k)


def plain_minilm() -> Callable[[list[str]], np.ndarray]:
    """The model a user would pick by itself: MiniLM over each whole text."""
    from mnemosyne.recall.embedders import default_embedder

    return default_embedder()


def build(conv: Conversation, folder: Path) -> tuple[Repo, float]:
    """A store of the conversation, and its ingest time (commits, then indexing and embedding)."""
    repo = Repo.init(folder / f"{conv.name}.mnemo")
    started = time.perf_counter()
    for number, session in enumerate(conv.sessions, 1):
        repo.commit(
            put=[Node(id=memory_id(t), content=t.content, event_time=t.when) for t in session],
            message=f"session {number}",
            author="locomo",
        )
    repo.search("warm up", k=1)  # the first search indexes and embeds what the commits queued
    return repo, time.perf_counter() - started


def measure(conversations: list[Conversation], limit: int | None) -> tuple[dict[str, System], dict[str, float]]:
    systems = {name: System(name) for name in (
        "search (hybrid)", "search (lexical)", "search (semantic)", "context (~10 turns)",
        "bm25s (stop words, stemmed)", "exact cosine (same embedder)", "RRF of bm25s and cosine",
        "exact cosine (MiniLM, whole texts)", "RRF of bm25s and MiniLM whole texts")}
    stats = {"turns": 0.0, "ingest_s": 0.0, "questions": 0.0}
    with tempfile.TemporaryDirectory(prefix="mnemo-quality-") as tmp:
        for conv in conversations:
            repo, ingest = build(conv, Path(tmp))
            try:
                turns = conv.turns
                stats["turns"] += len(turns)
                stats["ingest_s"] += ingest
                embedder = repo.embedder()
                ids = [memory_id(t) for t in turns]
                base = Baselines([t.content for t in turns], ids, embedder)
                whole = Baselines([t.content for t in turns], ids, plain_minilm()) if embedder is not None else None
                costs = sorted(estimate_tokens(f"[{i}@0000000] {t.content}") for i, t in zip(ids, turns, strict=True))
                budget = CONTEXT_TURNS * costs[len(costs) // 2]
                by_dia = {t.dia_id: memory_id(t) for t in turns}
                questions = conv.questions[:limit] if limit else conv.questions
                for q in questions:
                    evidence = frozenset(by_dia[e] for e in q.evidence)
                    stats["questions"] += 1
                    for name, mode in (("search (hybrid)", "hybrid"), ("search (lexical)", "lexical"),
                                       ("search (semantic)", "semantic")):
                        if mode == "semantic" and embedder is None:
                            continue
                        started = time.perf_counter()
                        hits = repo.search(q.text, k=max(KS), mode=mode)
                        systems[name].seconds.append(time.perf_counter() - started)
                        systems[name].record(q, [h.id for h in hits], evidence)
                    started = time.perf_counter()
                    packed = repo.context(q.text, budget_tokens=budget)
                    systems["context (~10 turns)"].seconds.append(time.perf_counter() - started)
                    systems["context (~10 turns)"].record(q, [i.id for i in packed.items], evidence, whole=True)
                    lex = base.lexical(q.text, 100)
                    systems["bm25s (stop words, stemmed)"].record(q, lex, evidence)
                    if embedder is not None:
                        dense = base.dense(q.text, 100)
                        systems["exact cosine (same embedder)"].record(q, dense, evidence)
                        systems["RRF of bm25s and cosine"].record(q, rrf(lex, dense), evidence)
                    if whole is not None:
                        plain = whole.dense(q.text, 100)
                        systems["exact cosine (MiniLM, whole texts)"].record(q, plain, evidence)
                        systems["RRF of bm25s and MiniLM whole texts"].record(q, rrf(lex, plain), evidence)
                print(f"{conv.name}: {len(turns)} turns, {len(questions)} questions, ingest {len(turns) / ingest:.0f} turns/s",
                      flush=True)
            finally:
                repo.close()
    return systems, stats


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def report(systems: dict[str, System], stats: dict[str, float], conversations: list[Conversation],
           embedder_name: str) -> str:
    lines = [
        "# Recall quality on LoCoMo",
        "",
        f"Written by `make bench-quality` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{len(conversations)} conversations ({', '.join(c.name for c in conversations)}), "
        f"{int(stats['turns'])} turns, {int(stats['questions'])} questions of categories 1-4; "
        f"embedder `{embedder_name}`. Evidence recall@k: the share of a question's evidence turns among the top k "
        "(Maharana et al., ACL 2024). `context` is measured on what it packs into the budget of about "
        f"{CONTEXT_TURNS} turns.",
        "",
        "| ranking | R@5 | R@10 | R@25 | " + " | ".join(f"cat {c} R@10" for c in CATEGORIES) + " | p50 ms | p95 ms |",
        "|---|---:|---:|---:|" + "---:|" * len(CATEGORIES) + "---:|---:|",
    ]
    for system in systems.values():
        if not system.recalls:
            continue
        cells = [f"{mean(system.recalls[k]):.3f}" for k in KS]
        if system.name.startswith("context"):
            cells = ["", f"{mean(system.recalls[10]):.3f}", ""]  # among all it packs, whatever their count
        cats = [f"{mean(system.by_category.get((c, 10), [])):.3f}" for c in CATEGORIES]
        if system.seconds:
            ms = sorted(s * 1e3 for s in system.seconds)
            timing = [f"{statistics.median(ms):.1f}", f"{ms[int(0.95 * (len(ms) - 1))]:.1f}"]
        else:
            timing = ["", ""]
        lines.append(f"| {system.name} | " + " | ".join(cells + cats + timing) + " |")
    lines += [
        "",
        f"Ingest: {stats['turns'] / stats['ingest_s']:.0f} turns/s (commits of one session each, then the first "
        "search's indexing and embedding).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="questions per conversation (quick checks)")
    parser.add_argument("--conversations", type=int, default=None, help="read only the first N files")
    args = parser.parse_args()
    if not args.data.is_dir() or not any(args.data.glob("*.json")):
        sys.exit(f"bench-quality: no LoCoMo conversations (*.json) in {args.data}; give --data DIR")
    conversations = load_all(args.data)[: args.conversations]
    systems, stats = measure(conversations, args.limit)
    with Repo.init(Path(tempfile.mkdtemp()) / "probe.mnemo") as probe:
        embedder_name = getattr(probe.embedder(), "model_id", "none")
    text = report(systems, stats, conversations, embedder_name)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
