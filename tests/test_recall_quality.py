"""What each recall improvement finds that the ranking before it missed, on small conversations of our own.

Stemmed terms and words split at "_" (lexical), a text's vector from its
statements' sentences (semantic), scaled scores weighed with neighbouring
memories, the session, the speaker and the text's own shape (hybrid), and a
context that carries event times and the memory before a fragment; and none of
it brings back what a snapshot no longer holds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne import Claim, HashEmbedder, Node, Repo
from mnemosyne.recall import ranker
from mnemosyne.recall import text as text_module
from mnemosyne.recall.embedders import SentenceMean, query_vectors, sentences
from mnemosyne.recall.fusion import Fused, Ranked, beside, numbered, scaled
from mnemosyne.recall.timing import asks_when, names_a_time
from mnemosyne.store.kv.base import Space

MAY = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)


def chat(repo: Repo, turns: list[str], session: int = 1, when: datetime = MAY) -> None:
    """One commit of a conversation's session: a memory per turn, ``chat/s<session>/t<n>``."""
    repo.commit(
        [Node(id=f"chat/s{session}/t{n}", content=text, event_time=when) for n, text in enumerate(turns, 1)],
        message=f"session {session}",
    )


# -- lexical: stems and words inside names ------------------------------------------------------


def test_a_question_finds_a_memory_by_another_form_of_its_words() -> None:
    repo = Repo.in_memory(embedder="none")
    chat(repo, ["Mira: Researching adoption agencies has been a dream.", "Bo: I painted the fence."])
    # Before: "research" and "researching" were different words; the memory was not found at all.
    assert [h.id for h in repo.search("what was researched", mode="lexical")] == ["chat/s1/t1"]
    assert [h.id for h in repo.search("agency", mode="lexical")] == ["chat/s1/t1"]


def test_a_word_inside_a_claims_predicate_finds_it() -> None:
    repo = Repo.in_memory(embedder="none")
    repo.commit(
        [
            Node(
                id="facts/f1",
                kind="claim",
                content=Claim(
                    subject="mira", predicate="passport_deadline", value="2026-07-15", valid_from=MAY
                ),
            )
        ]
    )
    # Before: passport_deadline was one word, and "passport" found nothing.
    assert [h.id for h in repo.search("passport", mode="lexical")] == ["facts/f1"]


def test_stop_words_do_not_rank_and_a_query_of_only_stop_words_still_matches() -> None:
    repo = Repo.in_memory(embedder="none")
    chat(repo, ["it is what it is", "the cat sat on the mat", "a cat"])
    # "the" would favour t2 over t3 for "the cat"; it ranks nothing, so the shorter wins.
    assert next(h.id for h in repo.search("the cat", mode="lexical")) == "chat/s1/t3"
    assert [h.id for h in repo.search("it is", mode="lexical")] == ["chat/s1/t1"]


# -- semantic: a vector from the sentences a text states -----------------------------------------


def test_sentences_carry_the_speaker_and_leave_questions_out() -> None:
    assert sentences("Mira: I moved to Lyon. The job starts in May!") == [
        "Mira: I moved to Lyon.",
        "Mira: The job starts in May!",
    ]
    assert sentences("Bo: Nice! Where did you move?") == ["Bo: Nice!"]
    assert sentences("Bo: Where did you move? When?") == ["Bo: Where did you move?", "Bo: When?"]
    assert sentences("one plain note") == ["one plain note"]
    assert sentences("") == [""]
    many = " ".join(f"Fact {i}." for i in range(40))
    pieces = sentences(many)
    assert len(pieces) == 16 and " ".join(pieces) == many


class Unit:
    """A model whose vectors are not unit length, to show the mean normalises each sentence first."""

    model_id = "unit-test"
    dim = 8

    def __call__(self, texts: list[str]) -> np.ndarray:
        return HashEmbedder(8)(texts) * np.arange(1, len(texts) + 1, dtype=np.float32)[:, None]


@settings(max_examples=examples(60), deadline=None)
@given(
    statements=st.lists(
        st.sampled_from(["I cook pasta.", "It rains.", "We met in May!", "Lyon is far."]), min_size=1
    ),
    questions=st.lists(st.sampled_from(["Do you cook?", "Why?", "Where is it?"]), max_size=3),
)
def test_a_texts_vector_is_the_mean_of_its_statements_alone(
    statements: list[str], questions: list[str]
) -> None:
    embed = SentenceMean(HashEmbedder(16))
    mixed = " ".join(statements + questions)
    plain = " ".join(statements)
    got = embed([mixed, plain])
    assert np.allclose(got[0], got[1], atol=1e-6)  # questions say nothing of what a memory knows
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5) or not got.any()
    expected = HashEmbedder(16)(sentences(plain)).sum(axis=0)
    assert np.allclose(got[1], expected / np.linalg.norm(expected), atol=1e-5)
    assert embed.model_id == "hash-16+sentences"  # never mixed with the whole-text vectors
    scaled = SentenceMean(Unit())([plain])[0]
    assert np.isclose(np.linalg.norm(scaled), 1.0, atol=1e-5)


def test_a_query_is_embedded_whole_its_question_kept() -> None:
    embed = SentenceMean(HashEmbedder(32))
    asked = "Planning ahead. Where does Mira live?"
    assert np.allclose(query_vectors(embed, [asked]), HashEmbedder(32)([asked]))
    assert not np.allclose(embed([asked]), embed.embed_query([asked]))  # a memory would lose the question
    repo = Repo.in_memory(embedder=embed)  # type: ignore[arg-type]
    repo.commit(
        [
            Node(id="m/1", content="Mira does live where the river is"),
            Node(id="m/2", content="Planning ahead is wise"),
        ]
    )
    assert next(h.id for h in repo.search(asked, mode="semantic")) == "m/1"
    # As a memory is split, the query would have kept "Planning ahead." alone, and found m/2.
    assert float(embed([asked])[0] @ embed(["Planning ahead is wise"])[0]) > float(
        embed([asked])[0] @ embed(["Mira does live where the river is"])[0]
    )


def test_a_statement_outranks_a_question_that_shares_its_words() -> None:
    turns = [
        "Bo: Cool. What music does Mira play? Does Mira play music?",
        "Mira: I play piano music every evening at home with my old teacher.",
        "Bo: Nice.",
    ]
    repo = Repo.in_memory(embedder=SentenceMean(HashEmbedder(64)))  # type: ignore[arg-type]
    chat(repo, turns)
    assert next(h.id for h in repo.search("What music does Mira play?", mode="semantic")) == "chat/s1/t2"
    before = Repo.in_memory(embedder="hash")  # the whole text, questions included
    chat(before, turns)
    assert next(h.id for h in before.search("What music does Mira play?", mode="semantic")) == "chat/s1/t1"


# -- hybrid: scaled scores and neighbours ----------------------------------------------------------


def rrf(lexical: list[tuple[bytes, str, float]], semantic: list[tuple[bytes, str, float]]) -> list[str]:
    """The fusion before: reciprocal rank, k = 60."""
    score: dict[str, float] = {}
    for ranked in (lexical, semantic):
        for rank, (_, node_id, _) in enumerate(ranked, 1):
            score[node_id] = score.get(node_id, 0.0) + 1.0 / (60 + rank)
    return sorted(score, key=lambda i: (-score[i], i))


def ranked(lexical: Ranked, semantic: Ranked) -> list[Fused]:
    """The hybrid order of two rankings, every candidate's text the same."""
    return ranker.rank(scaled(lexical, semantic), 100, lambda _: Node(id="n", content="a note"), "a question")


def test_a_ranking_that_is_sure_is_not_dragged_down_by_one_that_is_not() -> None:
    # BM25 is sure of "x" (10 against 1); the cosines of x, y and w are all but equal.
    lexical = [(b"x", "m/x", 10.0), (b"y", "m/y", 1.0)]
    semantic = [(b"y", "m/y", 0.50), (b"w", "m/w", 0.49), (b"x", "m/x", 0.48), (b"v", "m/v", 0.10)]
    assert rrf(lexical, semantic)[0] == "m/y"  # before: the near-tie's order outvoted the clear winner
    fused = ranked(lexical, semantic)
    assert [f.id for f in fused][:2] == ["m/x", "m/y"]
    assert (fused[0].lexical_rank, fused[0].semantic_rank) == (1, 3)


def test_neighbours_are_the_ids_beside_by_their_number() -> None:
    assert numbered("chat/s3/t7") == ("chat/s3/t", 7)
    assert numbered("users/mira/lang") is None
    assert beside("chat/s3/t7", -1) == ["chat/s3/t6"]
    assert beside("log/0099", 1) == ["log/0100", "log/100"]
    assert beside("log/7", 1) == ["log/8"]
    assert beside("chat/s1/t10", -1) == ["chat/s1/t09", "chat/s1/t9"]  # padded or not
    assert beside("log/0", -1) == [] and beside("users/mira/lang", 1) == []
    # The answer after the question sees the question's base score; other namespaces do not count.
    candidates = scaled(
        [(b"q", "c/s1/t4", 8.0), (b"o", "c/s2/t5", 4.0)],
        [(b"a", "c/s1/t5", 0.2), (b"q", "c/s1/t4", 0.9), (b"f", "c/s9/t1", 0.3)],
    )
    rows = {
        c.id: dict(zip(ranker.FEATURES, row, strict=True))
        for c, row in zip(
            candidates,
            ranker.features(candidates, 100, lambda _: Node(id="n", content="a note"), "a question"),
            strict=True,
        )
    }
    question_base = 0.5 * 1.0 + 0.5 * 1.0
    assert rows["c/s1/t5"]["before_1"] == pytest.approx(question_base)
    assert rows["c/s1/t4"]["after_1"] == pytest.approx(rows["c/s1/t5"]["base"])
    assert rows["c/s1/t5"]["stem_best"] == pytest.approx(question_base)
    # No neighbour among the candidates:
    assert rows["c/s2/t5"]["before_1"] == rows["c/s2/t5"]["after_1"] == 0.0
    assert rows["c/s2/t5"]["stem_best"] == pytest.approx(rows["c/s2/t5"]["base"])


@settings(max_examples=examples(50), deadline=None)
@given(
    lexical=st.lists(st.floats(0.01, 50), max_size=8),
    semantic=st.lists(st.floats(-1, 1), max_size=8),
)
def test_fusion_keeps_every_candidate_once_best_first(lexical: list[float], semantic: list[float]) -> None:
    lex = sorted(((f"l{i}".encode(), f"n/{i}", s) for i, s in enumerate(lexical)), key=lambda t: -t[2])
    sem = sorted(((f"l{i}".encode(), f"n/{i}", s) for i, s in enumerate(semantic)), key=lambda t: -t[2])
    candidates = scaled(lex, sem)
    assert sorted(c.oid for c in candidates) == sorted({oid for oid, _, _ in lex + sem})
    assert all(0.0 <= c.lexical <= 1.0 and c.semantic <= 1.0 + 1e-9 for c in candidates)
    fused = ranked(lex, sem)
    assert sorted(f.oid for f in fused) == sorted(c.oid for c in candidates)
    scores = [f.score for f in fused]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores)  # a probability
    if lex and not sem:  # one ranking alone keeps its own scale and order
        assert [c.oid for c in scaled(lex, [])] == [oid for oid, _, _ in lex]
        assert [c.base for c in scaled(lex, [])] == [c.lexical for c in scaled(lex, [])]


def test_the_reply_after_the_question_is_found_though_it_shares_no_word_with_it() -> None:
    repo = Repo.in_memory(embedder="hash")
    chat(
        repo,
        [
            "Bo: Did you ever move to Lyon for the new job?",
            "Mira: Yes, last spring, and I love it.",
            "Bo: I adopted a cat named Pixel.",
            "Mira: I started pottery classes.",
            "Bo: My sister visits from Porto next week.",
            "Mira: The bakery on our street closed.",
        ],
    )
    hits = [h.id for h in repo.search("When did Mira move to Lyon?", k=2)]
    assert sorted(hits) == ["chat/s1/t1", "chat/s1/t2"]
    # Alone, neither ranking puts the reply in the top two.
    for mode in ("lexical", "semantic"):
        assert "chat/s1/t2" not in [h.id for h in repo.search("When did Mira move to Lyon?", k=2, mode=mode)]


# -- context: event times and the memory before a fragment ------------------------------------------


def test_context_packs_the_question_above_a_short_reply_with_event_dates() -> None:
    repo = Repo.in_memory(embedder="none")
    chat(repo, ["Bo: Where did you spend your holidays in the mountains?", "Mira: Chamonix!", "Bo: Nice."])
    built = repo.context("Chamonix", budget_tokens=200)
    assert [(i.id, i.context_for) for i in built.items] == [
        ("chat/s1/t1", "chat/s1/t2"),
        ("chat/s1/t2", None),
    ]
    assert all(i.event_time == MAY for i in built.items)
    assert (
        built.render().splitlines()[1].startswith("[chat/s1/t2@")
        and "(2026-05-08) Mira: Chamonix!" in built.render()
    )
    assert built.tokens == sum(i.tokens for i in built.items) <= 200
    # No room for both: the hit alone.
    alone = repo.context("Chamonix", budget_tokens=built.items[1].tokens)
    assert [i.id for i in alone.items] == ["chat/s1/t2"]
    # The read log lists every memory shown, the one packed beside the hit too.
    repo.context("Chamonix", budget_tokens=200, run_id="run-1")
    (read,) = repo.reads("run-1")
    assert (read.ids, read.hashes) == ([i.id for i in built.items], [i.hash for i in built.items])


def test_a_zero_padded_question_is_found_across_a_digit_boundary() -> None:
    repo = Repo.in_memory(embedder="none")
    repo.commit(
        [
            Node(id="chat/s1/t09", content="Bo: Where did you spend your holidays in the mountains?"),
            Node(id="chat/s1/t10", content="Mira: Chamonix!"),
        ]
    )
    assert [i.id for i in repo.context("Chamonix", budget_tokens=200).items] == ["chat/s1/t09", "chat/s1/t10"]


@pytest.mark.parametrize("gone", ["deleted", "erased", "superseded", "filtered"])
def test_context_never_packs_a_neighbour_the_snapshot_does_not_hold(gone: str) -> None:
    repo = Repo.in_memory(embedder="none")
    chat(repo, ["Bo: Where did you spend your holidays in the mountains?", "Mira: Chamonix!"])
    if gone == "deleted":
        repo.commit(delete=["chat/s1/t1"])
    elif gone == "erased":
        repo.forget("chat/s1/t1", reason="asked")
    elif gone == "superseded":
        repo.commit([Node(id="chat/s1/t1", content="Bo: And the lakes?")])
    built = repo.context("Chamonix", budget_tokens=200, prefix="chat/s1/t2" if gone == "filtered" else None)
    texts = [i.text for i in built.items]
    assert "Mira: Chamonix!" in texts
    assert "Bo: Where did you spend your holidays in the mountains?" not in texts
    if gone == "superseded":
        assert texts == ["Bo: And the lakes?", "Mira: Chamonix!"]  # the current version, not the old one
    else:
        assert texts == ["Mira: Chamonix!"]


def test_neighbours_never_bring_back_what_search_may_not_return() -> None:
    repo = Repo.in_memory(embedder="hash")
    chat(repo, ["Bo: Did you ever move to Lyon?", "Mira: Yes, last spring.", "Bo: Lyon Lyon Lyon move move."])
    repo.forget("chat/s1/t3", reason="asked")
    repo.commit(delete=["chat/s1/t1"])
    hits = repo.search("move to Lyon", k=10)
    assert "chat/s1/t1" not in {h.id for h in hits} and "chat/s1/t3" not in {h.id for h in hits}
    assert repo.fsck().ok


def test_forget_leaves_no_word_of_the_memory_in_the_processs_word_caches() -> None:
    repo = Repo.in_memory(embedder="none")
    chat(repo, ["Mira: my locker code is zanzibarian", "Bo: ok"])
    assert [h.id for h in repo.search("zanzibarian")] == ["chat/s1/t1"]
    assert any("zanzibar" in word for word in text_module._STEMS)
    repo.forget("chat/s1/t1", reason="asked")
    assert not any("zanzibar" in word for word in text_module._STEMS)
    assert repo.search("zanzibarian") == []


def test_a_short_claim_is_not_taken_for_a_fragment() -> None:
    repo = Repo.in_memory(embedder="none")
    repo.commit(
        [
            Node(id="facts/f1", content="an unrelated note about the weather in Porto"),
            Node(
                id="facts/f2",
                kind="claim",
                content=Claim(subject="mira", predicate="passport_deadline", value="July", valid_from=MAY),
            ),
        ]
    )
    assert [i.id for i in repo.context("passport", budget_tokens=200).items] == ["facts/f2"]


def test_fusion_does_not_stretch_near_tied_cosines_into_a_whole_share() -> None:
    # Three candidates, cosines within float noise: BM25's clear winner stays first.
    lexical = [(b"x", "m/x", 10.0), (b"y", "m/y", 1.0)]
    semantic = [(b"y", "m/y", 0.5000002), (b"w", "m/w", 0.5000001), (b"x", "m/x", 0.5)]
    assert ranked(lexical, semantic)[0].id == "m/x"


def test_a_read_only_handle_searches_an_unstemmed_index_in_its_own_terms(tmp_path, monkeypatch) -> None:
    path = tmp_path / "store"
    with Repo.init(path, embedder="none") as repo:
        with monkeypatch.context() as patched:  # index as layout 4 did: words unstemmed
            patched.setattr(text_module, "words", text_module.unstemmed_words)
            repo.commit([Node(id="m/1", content="Researching adoption agencies")])
            repo.search("warm")
        repo.kv.transact(lambda txn: txn.put(Space.RECALL, bytes(4) + b"f", b"4"))
    with Repo.open(path, readonly=True, embedder="none") as reader:
        assert [h.id for h in reader.search("researching agencies")] == ["m/1"]
    with Repo.open(path, embedder="none") as writer:  # re-indexes, stemmed
        assert [h.id for h in writer.search("research agency")] == ["m/1"]


# -- questions that ask when --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Mira move to Lisbon?", True),
        ("how long has Bo painted", True),
        ("What year did they marry?", True),
        ("So when did the bakery close?", True),
        ("Did Mira move to Lisbon?", False),
        ("What does Bo paint when it rains?", False),
    ],
)
def test_a_question_asks_when_by_its_words(question: str, asks: bool) -> None:
    assert asks_when(question) is asks


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("We moved last May, in 2022.", True),
        ("Yesterday the bakery closed.", True),
        ("Three weeks ago I started.", True),
        ("On Saturday we hiked.", True),
        ("You may come along.", False),  # the verb, not the month
        ("I have 3 cats and 12 plants.", False),
    ],
)
def test_a_text_names_a_time_by_its_words(text: str, names: bool) -> None:
    assert names_a_time(text) is names


_TIME_AS_A_PATTERN = re.compile(
    r"\b(yesterday|today|tonight|tomorrow"
    r"|last (week|weekend|month|year|night|summer|winter|spring|fall|autumn|time)"
    r"|next (week|weekend|month|year)|ago|weekend"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|january|february|march|april|june|july|august|september|october|november|december"
    r"|(19|20)\d\d)\b",
    re.IGNORECASE,
)
"""What names a time, as a pattern of alternatives: the rule :func:`names_a_time` reads word by word."""


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["last", "next", "week", "Monday", "may", "2021", "1899", "ago", "we", "met", "20x1", "year"]
        )
        | st.text(alphabet="abcdefghijklmnopqrstuvwxyzMW0129", min_size=1, max_size=6),
        max_size=8,
    )
)
def test_a_text_names_a_time_as_the_pattern_says(parts: list[str]) -> None:
    # Words one space apart, as the pattern wants them ("last  week" is a time to the words too).
    text = " ".join(parts)
    assert names_a_time(text) is (_TIME_AS_A_PATTERN.search(text) is not None)


def test_every_feature_has_a_weight() -> None:
    assert len(ranker.WEIGHTS) == len(ranker.FEATURES) == len(set(ranker.FEATURES))


def when_chat(repo: Repo, first: str, answer: str) -> None:
    chat(
        repo, [first, "Bo: I adopted a cat.", "Bo: Pottery is fun.", "Mira: The bakery closed.", "Bo: Porto!"]
    )
    chat(repo, ["Bo: I painted the fence.", "Mira: The garden is green.", "Bo: My sister called.", answer], 2)


def test_a_question_that_asks_when_finds_the_memory_that_names_the_time(monkeypatch) -> None:
    repo = Repo.in_memory(embedder="hash")
    when_chat(repo, "Mira: Moving to Lisbon, Lisbon!", "Mira: We moved to Lisbon in March.")
    assert [h.id for h in repo.search("When did Mira move to Lisbon?", k=1)] == ["chat/s2/t4"]
    # Before: nothing lifted the memory naming the time, and the one repeating the topic won.
    monkeypatch.setattr(ranker, "WEIGHTS", without(("names_a_time", "asked_when_names_a_time")))
    assert [h.id for h in repo.search("When did Mira move to Lisbon?", k=1)] == ["chat/s1/t1"]


def test_the_lift_reads_only_the_version_in_force() -> None:
    repo = Repo.in_memory(embedder="hash")
    when_chat(repo, "Mira: Moving to Lisbon, Lisbon!", "Mira: We moved to Lisbon in March.")
    repo.commit(
        [
            Node(
                id="chat/s2/t4",
                content="Mira: We moved to Lisbon with the whole family, the piano and the dog.",
            )
        ],
        message="corrected",
    )
    current = repo.get("chat/s2/t4")
    hits = repo.search("When did Mira move to Lisbon?", k=5)
    # The corrected version names no time: it is not lifted above the other, and the old one never comes back.
    assert hits[0].id == "chat/s1/t1"
    assert [h.hash for h in hits if h.id == "chat/s2/t4"] == [current.hash]


def without(names: tuple[str, ...]) -> tuple[float, ...]:
    """The ranker's weights with those of ``names`` at 0: the ranking before those features."""
    return tuple(0.0 if name in names else w for name, w in zip(ranker.FEATURES, ranker.WEIGHTS, strict=True))


@settings(max_examples=examples(50), deadline=None)
@given(scores=st.lists(st.floats(0.01, 50), min_size=1, max_size=8), chosen=st.sets(st.integers(0, 7)))
def test_naming_a_time_raises_a_candidate_alone_and_more_when_asked_when(
    scores: list[float], chosen: set[int]
) -> None:
    lex = sorted(((f"l{i}".encode(), f"n/x{i}", s) for i, s in enumerate(scores)), key=lambda t: -t[2])

    def scores_for(query: str, timed: set[int]) -> dict[bytes, float]:
        def node(oid: bytes) -> Node:  # the same number of words, a time named or not
            return Node(id="n", content="We met on Monday." if int(oid[1:]) in timed else "We met at noon.")

        return {f.oid: f.score for f in ranker.rank(scaled(lex, []), 100, node, query)}

    for query in ("Did we meet?", "When did we meet?"):
        plain, timed = scores_for(query, set()), scores_for(query, chosen)
        assert set(plain) == set(timed) == {oid for oid, _, _ in lex}
        for oid, score in timed.items():
            assert (score > plain[oid]) if int(oid[1:]) in chosen else (score == plain[oid])
    asked, not_asked = scores_for("When did we meet?", chosen), scores_for("Did we meet?", chosen)
    assert all(asked[oid] > not_asked[oid] for oid in asked if int(oid[1:]) in chosen)


def test_a_question_naming_a_speaker_finds_what_that_speaker_said(monkeypatch) -> None:
    repo = Repo.in_memory(embedder="hash")
    chat(
        repo,
        [
            "Mira: I grow roses in the garden.",
            "Bo: My sister visits from Porto next week.",
            "Mira: The bakery on our street closed.",
            "Bo: I adopted a cat named Pixel.",
            "Mira: I started pottery classes.",
            "Bo: I grow tomatoes and beans in my garden, and my garden grows well.",
        ],
    )
    question = "What does Mira grow in her garden?"
    assert [h.id for h in repo.search(question, k=1)] == ["chat/s1/t1"]
    # Before: the memory sharing more of the question's words won, whoever said it.
    monkeypatch.setattr(ranker, "WEIGHTS", without(("speaker_named",)))
    assert [h.id for h in repo.search(question, k=1)] == ["chat/s1/t6"]


def test_the_answer_in_the_session_that_matches_outranks_a_closer_wording_elsewhere(monkeypatch) -> None:
    repo = Repo.in_memory(embedder="hash")
    chat(
        repo,
        [
            "Bo: We drove to the lake on Sunday.",
            "Mira: The picnic was lovely.",
            "Bo: The lake was cold.",
            "Mira: I made a lemon tart.",
        ],
    )
    chat(repo, ["Bo: I cook pasta often.", "Mira: I cook for my neighbours on Fridays, mostly soup."], 2)
    question = "What did Mira cook for the picnic at the lake?"
    assert [h.id for h in repo.search(question, k=2)] == ["chat/s1/t2", "chat/s1/t4"]
    # Before: the session counted for nothing, and a turn sharing "cook" with the question came second.
    session = (
        "stem_best",
        "stem_lexical_sum",
        "stem_base_sum",
        "stem_lexical_best",
        "stem_semantic_best",
        "stem_candidates",
    )
    monkeypatch.setattr(ranker, "WEIGHTS", without(session))
    assert [h.id for h in repo.search(question, k=2)] == ["chat/s1/t2", "chat/s2/t2"]


@pytest.mark.parametrize("words", [10, 5_000, 400_000])
def test_a_long_memory_is_weighed_from_its_ends(words: int) -> None:
    # A search weighs every candidate's text: a memory of megabytes is read at its start
    # and end (a time or a question there still counts), its length estimated.
    text = "Mira: " + "tea " * words + "We met on Monday. Did we?"
    candidates = scaled([(b"m", "notes/long", 1.0)], [])
    (row,) = ranker.features(candidates, 100, lambda _: Node(id="n", content=text), "What did Mira drink?")
    shown = dict(zip(ranker.FEATURES, row, strict=True))
    assert shown["names_a_time"] == shown["asks"] == shown["speaker_named"] == 1.0
    assert shown["words"] == pytest.approx(np.log(len(text.split())), abs=0.1)


@settings(max_examples=examples(50), deadline=None)
@given(scores=st.lists(st.floats(0.01, 50), max_size=80), k=st.integers(1, 40))
def test_the_ranker_reads_the_texts_of_its_best_candidates_alone(scores: list[float], k: int) -> None:
    lex = sorted(((f"l{i}".encode(), f"n/x{i}", s) for i, s in enumerate(scores)), key=lambda t: -t[2])
    read: list[bytes] = []

    def node(oid: bytes) -> Node:
        read.append(oid)
        return Node(id="n", content="a note")

    fused = ranker.rank(scaled(lex, []), 100, node, "a question", k)
    assert len(read) == len(set(read)) == min(len(lex), max(ranker.READ_TEXTS, 2 * k))
    assert sorted(f.oid for f in fused) == sorted(oid for oid, _, _ in lex)
    assert {f.oid for f in fused[: len(read)]} == set(read)  # the texts read come first
    found = [f.score for f in fused]
    assert found == sorted(found, reverse=True)
