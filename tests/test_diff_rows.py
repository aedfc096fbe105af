"""The library's rows of a change: the one reading both the CLI and the viewer show."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne import Change, Node, Provenance
from mnemosyne.model.diff_rows import NO_NEWLINE, DiffRow, diff_rows
from mnemosyne.model.jsonform import node_builtins

_values = st.one_of(st.integers(-1000, 1000), st.text(max_size=5), st.none(), st.booleans())
_texts = st.text(alphabet="ab\nc", max_size=40)
_objects = st.dictionaries(st.sampled_from("wxyz"), _values, max_size=4)
_contents = st.one_of(_texts, _objects, st.integers(-5, 5))
_metas = st.one_of(st.none(), st.dictionaries(st.sampled_from("mn"), _values, min_size=1, max_size=2))
_sources = st.one_of(st.none(), st.sampled_from(["chat", "email"]))


@st.composite
def _nodes(draw: st.DrawFn, content: st.SearchStrategy[Any] = _contents) -> Node:
    return Node(
        id="users/mira/x",
        content=draw(content),
        meta=draw(_metas),
        provenance=Provenance(source=draw(_sources)),
    )


def _shown(node: Node) -> dict[str, Any]:
    fields = node_builtins(node)
    del fields["hash"]
    return fields


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    remaining = iter(whole)
    return all(any(line == other for other in remaining) for line in part)


@settings(max_examples=examples(300))
@given(_nodes(), _nodes())
def test_rows_are_empty_exactly_when_nothing_shown_changed(old: Node, new: Node) -> None:
    rows = diff_rows(Change(id=old.id, old=old, new=new, old_hash=old.hash, new_hash=new.hash))
    assert (rows == []) == (_shown(old) == _shown(new))


@settings(max_examples=examples(300))
@given(_nodes(_texts), _nodes(_texts))
def test_text_rows_are_a_unified_diff_of_the_two_texts(old: Node, new: Node) -> None:
    rows = diff_rows(Change(id=old.id, old=old, new=new, old_hash=old.hash, new_hash=new.hash))
    text_rows = [row for row in rows if row.text is not None and row.kind != "hunk"]
    old_side = [row.text for row in text_rows if row.kind in ("del", "ctx")]
    new_side = [row.text for row in text_rows if row.kind in ("add", "ctx")]
    assert _is_subsequence([t for t in old_side if t is not None], old.content.splitlines())
    assert _is_subsequence([t for t in new_side if t is not None], new.content.splitlines())
    if old.content != new.content:
        assert rows[0].kind == "hunk" and rows[0].text is not None and rows[0].text.startswith("@@")
        assert any(row.kind in ("add", "del") for row in text_rows)


@settings(max_examples=examples(300))
@given(_nodes(_objects), _nodes(_objects))
def test_object_rows_name_each_changed_key_with_its_values(old: Node, new: Node) -> None:
    rows = diff_rows(Change(id=old.id, old=old, new=new, old_hash=old.hash, new_hash=new.hash))
    content_rows = [row for row in rows if row.key is not None and "." not in row.key and row.key != "kind"]
    keys = set(old.content) | set(new.content)
    changed = {key for key in keys if old.content.get(key, ...) != new.content.get(key, ...)}
    assert {row.key: row.value for row in content_rows if row.kind == "del"} == {
        key: old.content[key] for key in changed if key in old.content
    }
    assert {row.key: row.value for row in content_rows if row.kind == "add"} == {
        key: new.content[key] for key in changed if key in new.content
    }
    meta_rows = {(row.kind, row.key): row.value for row in rows if row.key and row.key.startswith("meta.")}
    for key in set(old.meta or {}) | set(new.meta or {}):
        before, after = (old.meta or {}).get(key, ...), (new.meta or {}).get(key, ...)
        if before != after and before is not ...:
            assert meta_rows[("del", f"meta.{key}")] == before
        if before != after and after is not ...:
            assert meta_rows[("add", f"meta.{key}")] == after


@settings(max_examples=examples(200))
@given(_nodes())
def test_an_added_version_is_shown_whole_and_an_erased_side_has_no_rows(node: Node) -> None:
    added = diff_rows(Change(id=node.id, old=None, new=node, old_hash=None, new_hash=node.hash))
    assert {row.kind for row in added} == {"add"}
    if isinstance(node.content, str):
        assert [row.text for row in added] == (node.content.splitlines() or [""])
    elif isinstance(node.content, dict):
        expected = [(key, node.content[key]) for key in sorted(node.content)] or [(None, {})]
        assert [(row.key, row.value) for row in added] == expected
    else:
        assert added == [DiffRow(kind="add", value=node.content)]
    erased = diff_rows(Change(id=node.id, old=None, new=node, old_hash="ab" * 32, new_hash=node.hash))
    assert erased == added  # the erased old side adds nothing: a face says it was erased
    removed = diff_rows(Change(id=node.id, old=node, new=None, old_hash=node.hash, new_hash="cd" * 32))
    assert [row.kind for row in removed] == ["del"] * len(added)


def _text_rows(old: str, new: str) -> list[tuple[str, str | None]]:
    before, after = Node(id="k", content=old), Node(id="k", content=new)
    change = Change(id="k", old=before, new=after, old_hash=before.hash, new_hash=after.hash)
    return [(row.kind, row.text) for row in diff_rows(change)]


def test_a_change_in_line_breaks_alone_is_shown_as_git_shows_it() -> None:
    # Texts equal line by line but for a final newline: the change is there, and said.
    assert _text_rows("a", "a\n") == [
        ("hunk", "@@ -1 +1 @@"),
        ("del", "a"),
        ("note", NO_NEWLINE),
        ("add", "a"),
    ]
    assert _text_rows("a\n", "a") == [
        ("hunk", "@@ -1 +1 @@"),
        ("del", "a"),
        ("add", "a"),
        ("note", NO_NEWLINE),
    ]
    assert _text_rows("a\r\nb", "a\nb") == [
        ("hunk", "@@ -1,2 +1,2 @@"),
        ("del", "a"),
        ("add", "a"),
        ("ctx", "b"),
    ]
    # Neither side ends with a newline (most memories): no note, as before.
    assert _text_rows("x", "y") == [("hunk", "@@ -1 +1 @@"), ("del", "x"), ("add", "y")]
