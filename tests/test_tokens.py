"""Access tokens of a served store: made once, kept as a keyed hash, checked, listed, revoked."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from support.cli_harness import CliStore, assert_error
from support.clocks import Clock

from mnemosyne import AccessDenied, InvalidInput, MnemoError, NotFound, Store
from mnemosyne.errors import exit_code
from mnemosyne.model.access import allows
from mnemosyne.store.kv.base import Space


@pytest.fixture
def store():
    with Store.in_memory() as made:
        made.create_tenant("acme")
        yield made


def test_a_token_is_shown_once_and_kept_only_as_a_keyed_hash(tmp_path) -> None:
    with Store.init(tmp_path / "s") as store:
        made = store.create_token("default", "write", name="bot")
        assert made.token.startswith("mnemo_" + made.id + "_")
        assert (made.name, made.tenant, made.role, made.expires_at) == ("bot", "default", "write", None)
        with store.kv.read() as txn:
            stored = b"".join(key + value for key, value in txn.scan(Space.META, b""))
        secret = made.token.split("_", 2)[2]  # the secret may hold "_" itself
        assert len(secret) == 43
        assert made.token.encode() not in stored and secret.encode() not in stored
        listed = store.tokens()
        assert [(t.id, t.name, t.tenant, t.role) for t in listed] == [(made.id, "bot", "default", "write")]
        assert "token" not in type(listed[0]).__struct_fields__
        assert store.check_token(made.token) == listed[0]
    with Store.open(tmp_path / "s") as store:  # across processes: the key is the store's
        assert store.check_token(made.token) == listed[0]


def test_check_refuses_anything_but_a_live_token_alike(store) -> None:
    made = store.create_token("acme", "read")
    text = made.token
    for wrong in [
        "",
        "nope",
        text[:-1],
        text[:-1] + ("A" if text[-1] != "A" else "B"),
        text + "x",
        text.upper(),
    ]:
        assert store.check_token(wrong) is None, wrong
    assert store.check_token(text.replace(made.id, "0" * 12)) is None
    assert store.check_token(text) is not None
    assert store.revoke_token(made.id).id == made.id
    assert store.check_token(text) is None  # revoked: at once
    assert store.tokens() == []


def test_expiry_is_judged_by_the_clock(store) -> None:
    clock = Clock(step=timedelta(0))
    made = store.create_token("default", "admin", expires=timedelta(days=30), clock=clock)
    assert made.expires_at == made.created_at + timedelta(days=30)
    clock.now += timedelta(days=30) - timedelta(microseconds=1)
    assert store.check_token(made.token, clock=clock) is not None
    clock.now += timedelta(microseconds=1)
    assert store.check_token(made.token, clock=clock) is None
    assert [t.id for t in store.tokens()] == [made.id]  # listed (as expired) until revoked


def test_bad_arguments_are_refused_and_write_nothing(store) -> None:
    store.create_token("default", "read", name="bot")
    cases = [
        (InvalidInput, dict(tenant="default", role="owner")),
        (InvalidInput, dict(tenant="default", role="read", name="bot")),  # taken
        (InvalidInput, dict(tenant="default", role="read", name="a b")),
        (InvalidInput, dict(tenant="default", role="read", name="0123456789ab")),  # an id's shape
        (InvalidInput, dict(tenant="default", role="read", expires=timedelta(0))),
        (InvalidInput, dict(tenant="Bad Name", role="read")),
        (NotFound, dict(tenant="nowhere", role="read")),
    ]
    for error, kwargs in cases:
        with pytest.raises(error):
            store.create_token(**kwargs)
    assert [t.name for t in store.tokens()] == ["bot"]
    with pytest.raises(NotFound):
        store.revoke_token("nobody")


def test_revoke_by_id_or_name_and_dropping_a_tenant_drops_its_tokens(store) -> None:
    kept = store.create_token("default", "read", name="kept")
    named = store.create_token("acme", "write", name="acme-bot")
    unnamed = store.create_token("acme", "read")
    assert [t.id for t in store.tokens()] == [named.id, unnamed.id, kept.id]  # by tenant, then name
    assert store.revoke_token("acme-bot").id == named.id
    store.drop_tenant("acme")
    assert [t.id for t in store.tokens()] == [kept.id]
    assert store.check_token(unnamed.token) is None
    store.create_tenant("acme")  # the same name again: the old tokens do not reach it
    assert store.check_token(unnamed.token) is None


def test_roles_nest_and_access_denied_has_its_exit_code() -> None:
    assert allows("admin", "write") and allows("write", "read") and allows("read", "read")
    assert not allows("read", "write") and not allows("write", "admin")
    assert exit_code(AccessDenied("x")) == 7
    assert isinstance(AccessDenied("x"), MnemoError)


def test_exports_do_not_carry_tokens(tmp_path) -> None:
    with Store.init(tmp_path / "a") as source:
        source.create_token("default", "admin")
        out = io.BytesIO()
        source.export(out)
    with Store.init(tmp_path / "b") as copy:
        copy.import_(io.BytesIO(out.getvalue()))
        assert copy.tokens() == []


# -- the command line ------------------------------------------------------------------


def test_token_commands(tmp_path) -> None:
    cli = CliStore(tmp_path / "store")
    made = cli.result("token", "create", "--role", "write", "--name", "bot", "--expires", "30d")
    text = made.stdout.strip()
    assert text.startswith("mnemo_") and made.stdout.count("\n") == 1  # the token alone on stdout
    assert "shown once" in made.stderr and text not in made.stderr
    doc = cli.doc("token", "create", "--role", "read")
    assert set(doc) == {"token", "id", "name", "tenant", "role", "created_at", "expires_at"}
    assert (doc["tenant"], doc["role"], doc["name"], doc["expires_at"]) == ("default", "read", None, None)
    listed = cli.lines("token", "list")
    assert [t["name"] for t in listed] == ["bot", None]
    assert all(set(t) == {"id", "name", "tenant", "role", "created_at", "expires_at"} for t in listed)
    rows = cli.ok("token", "list")
    assert text not in rows and doc["token"] not in rows
    assert "bot  default  write  expires " in rows and "-  default  read   never expires" in rows
    assert cli.doc("token", "revoke", "bot")["name"] == "bot"
    assert cli.ok("token", "revoke", doc["id"]).startswith(f"revoked token {doc['id']}")
    assert cli.lines("token", "list") == []
    assert_error(cli.run("token", "revoke", "bot"), 3, "no token with id or name 'bot'")
    assert_error(cli.run("token", "create", "--role", "owner"), 2, "'owner' is not a role")
    assert_error(cli.run("token", "create", "--role", "read", "--tenant", "nowhere"), 3, "no tenant named")
    assert_error(cli.run("token", "create", "--role", "read", "--expires", "soon"), 2, "--expires")
    tenant = CliStore(tmp_path / "store", tenant="acme")
    tenant.ok("tenant", "create", "acme")
    assert tenant.doc("token", "create", "--role", "admin")["tenant"] == "acme"  # the global --tenant


def test_serve_refuses_what_it_cannot_do_before_binding(tmp_path) -> None:
    cli = CliStore(tmp_path / "store")
    assert_error(cli.run("serve", "--max-body", "lots"), 2, "--max-body")
    assert_error(CliStore(tmp_path / "store", tenant="acme").run("serve"), 2, "drop --tenant")
    assert_error(cli.run("serve", "--host", "0.0.0.0"), 2, "refusing to serve on 0.0.0.0")
    expired = datetime.now(UTC) - timedelta(days=2)
    with Store.open(tmp_path / "store") as store:
        store.create_token("default", "read", expires=timedelta(days=1), clock=lambda: expired)
    assert_error(cli.run("serve", "--host", "0.0.0.0"), 2, "no token")  # an expired one is none
