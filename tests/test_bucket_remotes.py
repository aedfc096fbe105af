"""Remotes in object storage (s3://BUCKET/PREFIX), against moto's S3-compatible server on loopback.

Push, fetch, pull and clone as with any remote; a push cut off part-way and run
again writes only what is missing; two pushers racing for one branch leave
exactly one winner (compare-and-swap on the ref's ETag); an altered object in
the bucket is refused on fetch; erasure travels both ways and leaves no bytes
of the forgotten version in the bucket.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import msgspec
import pytest
from support.s3_server import AWS_ENV, Severable, s3_server

from mnemosyne import (
    BucketOptions,
    CorruptObject,
    InvalidInput,
    MnemoError,
    Node,
    Redacted,
    RefConflict,
    Repo,
)
from mnemosyne.admin import bucket_transfer
from mnemosyne.admin.bucket_remote import BucketTenant, Pack

CANARY = "C4NARY-S3-9T7K-passport"
_names = itertools.count()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    saved = {key: os.environ.get(key) for key in AWS_ENV}
    os.environ.update(AWS_ENV)
    try:
        with s3_server() as (url, _):
            yield url
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def bucket(endpoint: str) -> str:
    """A new empty bucket's name."""
    name = f"mnemo-test-{next(_names)}-{os.getpid()}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


def history(repo: Repo, start: int, count: int, text: str = "note") -> None:
    for i in range(start, start + count):
        repo.commit([Node(id=f"n{i}", content=f"{text} {i}")], message=f"c{i}")


def bucket_bytes(endpoint: str, bucket: str) -> list[tuple[str, bytes]]:
    """Every key of the bucket with its bytes."""
    client = boto3.client("s3", endpoint_url=endpoint)
    keys = [item["Key"] for item in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    return [(key, client.get_object(Bucket=bucket, Key=key)["Body"].read()) for key in keys]


def test_push_clone_fetch_pull_round_trip(tmp_path: Path, endpoint: str, bucket: str) -> None:
    options = BucketOptions(endpoint_url=endpoint)
    with Repo.init(tmp_path / "a") as a:
        history(a, 0, 40)
        added = a.store.add_remote("backup", f"s3://{bucket}/team/", bucket=options)
        assert added.location == f"s3://{bucket}/team" and added.bucket == options
        (part,) = a.push("backup").tenants
        assert part.commits == 40 and part.objects > 40 and part.refs[0].ref == "main"
        assert a.push("backup").tenants[0].objects == 0  # nothing new: nothing sent
        with Repo.clone(f"s3://{bucket}/team", tmp_path / "b", bucket=options) as b:
            assert b.head == "main" and b.get("n7").content == "note 7"
            assert [r.bucket for r in b.store.remotes()] == [options]  # origin keeps how it is reached
            history(a, 40, 5)
            a.push("backup")
            b_log = b.pull().fetch.tenants[0]
            assert b_log.commits == 5
            assert b.resolve("main").id == a.resolve("main").id
            assert b.get("n44").content == "note 44"
            assert b.fetch().tenants[0].refs == []  # a no-op fetch moves nothing
            # The other way: b pushes, a fetches it as backup/main.
            history(b, 100, 3, "from b")
            b.push("origin")
            a.fetch("backup")
            assert a.remote_branches()[0][1].id == b.resolve("main").id


@pytest.mark.slow  # the AWS SDK backs off between its tries once the bucket is cut off
def test_a_push_cut_off_part_way_is_resumed_not_repeated(
    tmp_path: Path, endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small packs and parts: a history of many, so the cut falls between them.
    monkeypatch.setattr(bucket_transfer, "PACK_BYTES", 2048)
    monkeypatch.setattr(bucket_transfer, "PART", 16)
    monkeypatch.setattr(bucket_transfer, "AHEAD", 1)
    proxy = Severable(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])))
    written: list[str] = []
    cuts: list[int] = []
    put_pack = BucketTenant.put_pack

    def counted(self: BucketTenant, name: str, pack: Pack) -> None:
        if len(written) == 12 and not cuts:
            cuts.append(1)
            proxy.sever()  # the bucket goes away after 12 packs
        put_pack(self, name, pack)
        written.append(name)

    monkeypatch.setattr(BucketTenant, "put_pack", counted)
    try:
        with Repo.init(tmp_path / "a") as a:
            history(a, 0, 120)
            a.store.add_remote("backup", f"s3://{bucket}/cut", bucket=BucketOptions(endpoint_url=proxy.url))
            with pytest.raises(MnemoError, match="backup"):
                a.push("backup")
            first = list(written)
            assert len(first) == 12
            proxy.restore()
            assert a.fetch("backup").tenants[0].refs == []  # the branch never moved there
            written.clear()
            (part,) = a.push("backup").tenants
            assert not set(first) & set(written), "a pack written before the cut was sent again"
            assert part.refs[0].new == a.resolve("main").id
        direct = BucketOptions(endpoint_url=endpoint)
        with (
            Repo.clone(f"s3://{bucket}/cut", tmp_path / "b", bucket=direct) as b,
            Repo.open(tmp_path / "a") as a2,
        ):
            assert [c.id for c in b.log()] == [c.id for c in a2.log()]
            assert b.get("n0").content == "note 0" and b.get("n119").content == "note 119"
    finally:
        proxy.close()


def test_two_pushers_racing_for_one_branch_leave_exactly_one_winner(
    tmp_path: Path, endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = BucketOptions(endpoint_url=endpoint)
    url = f"s3://{bucket}/race"
    with Repo.init(tmp_path / "base") as base:
        history(base, 0, 3)
        base.store.add_remote("backup", url, bucket=options)
        base.push("backup")
    a = Repo.clone(url, tmp_path / "a", bucket=options)
    b = Repo.clone(url, tmp_path / "b", bucket=options)
    history(a, 10, 2, "a says")
    history(b, 20, 2, "b says")
    put_ref = BucketTenant.put_ref
    raced: list[str] = []

    def b_goes_first(self: BucketTenant, branch: str, tip: bytes, etag: str | None) -> None:
        if not raced:  # a read the branch; b pushes before a writes it
            raced.append("b")
            b.push("origin")
        put_ref(self, branch, tip, etag)

    monkeypatch.setattr(BucketTenant, "put_ref", b_goes_first)
    with pytest.raises(RefConflict, match="lost a race"):
        a.push("origin")
    assert raced == ["b"]
    fetched = a.fetch("origin").tenants[0].refs
    assert [r.new for r in fetched] == [b.resolve("main").id]  # b's tip is the one kept
    a.close()
    b.close()


def test_an_altered_object_in_the_bucket_is_refused_on_fetch(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    options = BucketOptions(endpoint_url=endpoint)
    with Repo.init(tmp_path / "a") as a:
        history(a, 0, 5)
        a.store.add_remote("backup", f"s3://{bucket}/t", bucket=options)
        a.push("backup")
    client = boto3.client("s3", endpoint_url=endpoint)
    (key,) = [k for k, _ in bucket_bytes(endpoint, bucket) if "/packs/" in k]
    pack = msgspec.msgpack.decode(client.get_object(Bucket=bucket, Key=key)["Body"].read(), type=Pack)
    data = list(pack.data)
    at = next(i for i, d in enumerate(data) if b"note 3" in d)
    data[at] = data[at].replace(b"note 3", b"note 8")  # same length, other bytes
    client.put_object(Bucket=bucket, Key=key, Body=msgspec.msgpack.encode(Pack(ids=pack.ids, data=data)))
    with pytest.raises(CorruptObject, match="does not match its hash"):
        Repo.clone(f"s3://{bucket}/t", tmp_path / "b", bucket=options)
    assert not (tmp_path / "b").exists()  # a failed clone leaves nothing
    # A pack that is no pack at all is refused too.
    client.put_object(Bucket=bucket, Key=key, Body=b"\x93not a pack")
    with pytest.raises(CorruptObject, match="cannot be read"):
        Repo.clone(f"s3://{bucket}/t", tmp_path / "c", bucket=options)


def test_erasure_leaves_no_bytes_in_the_bucket_and_travels_to_fetchers(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    options = BucketOptions(endpoint_url=endpoint)
    url = f"s3://{bucket}/erase"
    with Repo.init(tmp_path / "a") as a:
        history(a, 0, 4)
        a.commit([Node(id="secret", content=f"passport {CANARY}")], message="oops")
        a.store.add_remote("backup", url, bucket=options)
        a.push("backup")
        assert any(CANARY.encode() in data for _, data in bucket_bytes(endpoint, bucket))
        b = Repo.clone(url, tmp_path / "b", bucket=options)
        a.forget("secret", reason="user asked")
        a.gc()
        (part,) = a.push("backup").tenants
        assert part.redactions == 1
        assert not any(CANARY.encode() in data for _, data in bucket_bytes(endpoint, bucket))
        b.pull()
        b.gc()
        with pytest.raises(Redacted):
            b.get("secret", at="HEAD~1")
        b.close()


@pytest.mark.parametrize(
    "url",
    [
        "s3://key:secret@bucket/prefix",
        "s3://bucket:9000/prefix",
        "s3://B/prefix",
        "s3://bucket/a/../b",
        "s3://bucket/p?versionId=1",
    ],
)
def test_a_bucket_url_holds_no_credentials_nor_anything_but_bucket_and_prefix(
    tmp_path: Path, url: str
) -> None:
    with Repo.init(tmp_path / "a") as a, pytest.raises(InvalidInput):
        a.store.add_remote("backup", url)


@pytest.mark.slow  # mnemo processes, and the AWS SDK's back-off before it gives up on a dead endpoint
def test_the_command_line_pushes_clones_and_says_one_line_on_failure(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    env = {**os.environ, **AWS_ENV, "MNEMO_EMBEDDER": "none", "MNEMO_TOKEN": "not-for-buckets"}

    def mnemo(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mnemo_cli", *args], cwd=cwd, env=env, capture_output=True, text=True
        )

    assert mnemo("init", "a").returncode == 0
    with Repo.open(tmp_path / "a") as a:
        history(a, 0, 3)
    url = f"s3://{bucket}/cli"
    done = mnemo("--repo", "a", "remote", "add", "backup", url, "--endpoint-url", endpoint)
    assert done.returncode == 0, done.stderr
    listed = mnemo("--repo", "a", "remote", "-v").stdout
    assert f"backup\t{url}\t(endpoint {endpoint})" in listed
    done = mnemo("--repo", "a", "push", "backup")
    assert done.returncode == 0, done.stderr
    done = mnemo("clone", url, "b", "--endpoint-url", endpoint)
    assert done.returncode == 0, done.stderr
    assert "Cloned" in done.stdout
    # Credentials in the URL: refused, one line, exit 2.
    done = mnemo("--repo", "a", "remote", "add", "leaky", "s3://AKIA:secret@bucket/p")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "secret" not in done.stderr
    # A bucket nothing answers for: one line, exit 3.
    mnemo("--repo", "a", "remote", "add", "gone", url, "--endpoint-url", "http://127.0.0.1:9")
    done = mnemo("--repo", "a", "push", "gone")
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "cannot reach remote 'gone'" in done.stderr
    # A push that is not a fast-forward: RefConflict, exit 4.
    with Repo.open(tmp_path / "b") as b:
        history(b, 10, 1, "b")
        b.push("origin")
    with Repo.open(tmp_path / "a") as a:
        history(a, 20, 1, "a")
    done = mnemo("--repo", "a", "push", "backup")
    assert done.returncode == 4 and done.stderr.count("\n") == 1, done.stderr
    assert "not a fast-forward" in done.stderr
