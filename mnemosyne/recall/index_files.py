"""The saved approximate index: where it is kept, and its files (see ADR 32).

Derived data, never hashed and never part of an export: any file here can be
deleted, and the next semantic search builds it again. A saved index of one
tenant's model is two files in the index directory, named for the tenant's key
scope and the model (and, in a cache outside the store, for the store too):

- ``NAME.TOKEN.graph``: the usearch graph with the rows' int8 vectors, as
  usearch saves it; every process using it maps it read-only;
- ``NAME.TOKEN.codes``: each row's vector again, by row number, as codes (int8
  in steps of the row's largest component, then that scale: ``dim + 4`` bytes;
  zeros for a dropped row), mapped too: a namespace is scored from them;
- ``NAME.rows``: the manifest. A header (format, the store's index identity,
  scope, model, width, the vector change-log position the file is caught up to
  and that entry, the row count, the graph file's name, size and row count,
  the typical nearest-neighbour cosine), then the rows' bookkeeping (content
  hashes, vector block and slot, liveness), the live rows in content-hash
  order, the isolated rows with their float32 vectors, and a CRC-32 of it all.
  The header also holds a CRC-32 of the graph and of the codes file, and each
  file's stamp when it was written (inode, size, modification and change times):
  usearch follows the graph's links through the mapping unchecked, so a damaged
  graph would crash the process. A file is mapped only once it checks out: in
  full when its stamp changed since it was written (anything that wrote to it
  changed its times), by its stamp alone otherwise, so a fresh search of a large
  index does not read the whole file first (ADR 59). ``fsck`` checks in full.

Writing is crash-safe: the graph is saved under a new name and flushed, the
manifest is written beside its final name, flushed and renamed over it (the
moment the new index takes over), the directory is flushed, and only then are
older graph files removed. A process that has an older graph mapped keeps
reading it (its bytes leave the disk when it lets go). A manifest that does not
check out (torn, damaged, another store's, another tenant's or model's, caught
up further than the store's log, or to an entry the log does not have) is not
used: the index is built again and the files replaced. Dropped rows leave the
files at the next save (the graph's freed slots are zeroed first, see
:meth:`Approximate.merged`), which compaction forces (:func:`scrub`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import secrets
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt

from mnemosyne.recall.approximate import SCALE_BYTES, Codes, Graph, Isolated, graph_metadata, new_graph
from mnemosyne.recall.index_location import IndexLocation

FORMAT = 1
"""The layout of the files this version writes."""
_MAGIC = b"MNEMOIX\x00"
_END = b"MNEMOEND"
_PREFIX = struct.Struct("<8sII")  # magic, format, header length
_TRAILER = struct.Struct("<I8s")  # CRC-32 of everything before, end mark
_ALIGN = 64
ROWS, GRAPH, CODES, LOCK = ".rows", ".graph", ".codes", ".lock"


class Header(msgspec.Struct, frozen=True):
    """What a manifest says of itself and its graph (checked before either is used)."""

    identity: str
    scope: str
    model: str
    dim: int
    seq: int
    entry: str
    count: int
    live: int
    isolated: int
    typical: float
    graph: str
    graph_bytes: int
    graph_rows: int
    codes: str = ""
    codes_bytes: int = 0
    graph_crc: int = -1
    """CRC-32 of the graph file (-1: written before files had one, not checked)."""
    codes_crc: int = -1
    graph_stamp: tuple[int, ...] = ()
    """The graph file's inode, size, modification and change times (ns) just after it was written."""
    codes_stamp: tuple[int, ...] = ()


class Saved:
    """A manifest read back: its header and the rows' bookkeeping.

    ``hashes`` and the isolated rows' vectors are read-only views of the mapped
    file (the largest parts: not copied); the other arrays are copies.
    """

    def __init__(
        self,
        header: Header,
        hashes: npt.NDArray[np.uint8],
        block: npt.NDArray[np.uint32],
        slot: npt.NDArray[np.uint8],
        alive: npt.NDArray[np.bool_],
        order: npt.NDArray[np.intp],
        isolated: Isolated,
    ) -> None:
        self.header = header
        self.hashes = hashes
        self.block = block
        self.slot = slot
        self.alive = alive
        self.order = order
        self.isolated = isolated


def _layout(count: int, live: int, isolated: int, dim: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """The arrays of a manifest, in order: name, dtype, shape."""
    return [
        ("hashes", "u1", (count, 32)),
        ("block", "<u4", (count,)),
        ("slot", "u1", (count,)),
        ("alive", "u1", (count,)),
        ("order", "<u4", (live,)),
        ("isolated", "<u4", (isolated,)),
        ("near", "<f4", (isolated,)),
        ("vectors", "<f4", (isolated, dim)),
    ]


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def read(location: IndexLocation, scope: bytes, model: str) -> tuple[Saved, Path, Path] | None:
    """The manifest of ``model`` in this tenant and its graph and codes files, if all check out.

    Checks the manifest's framing, CRC and sizes, and that the graph file is
    there with the size and row count it names, and the codes file with its
    size; the caller checks the header against the store. None when anything is
    missing or wrong (or unreadable).
    """
    name = location.name(scope, model)
    try:
        with open(location.path(name + ROWS), "rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # absent, unreadable, or empty (mmap refuses length 0)
        return None
    # Not closed here: the views of ``saved`` hold the mapping, and let go of it with them.
    saved = _parse(data)
    if saved is None:
        return None
    header = saved.header
    if (header.scope, header.model) != (scope.hex(), model):
        return None
    if not header.graph.startswith(name + ".") or not header.codes.startswith(name + "."):
        return None
    if any("/" in file or "\\" in file for file in (header.graph, header.codes)):
        return None  # a name that leaves the index directory (a shared cache) is not ours
    graph, codes = location.path(header.graph), location.path(header.codes)
    try:
        if graph.stat().st_size != header.graph_bytes or codes.stat().st_size != header.codes_bytes:
            return None
        meta = graph_metadata(str(graph))
    except (OSError, RuntimeError, ValueError):
        return None
    if not meta or meta.get("dimensions") != header.dim or meta.get("count_present") != header.graph_rows:
        return None
    if header.codes_bytes != header.count * (header.dim + SCALE_BYTES):
        return None
    try:
        if not (_checks_out(graph, header.graph_crc, header.graph_stamp, full=False)) or not (
            _checks_out(codes, header.codes_crc, header.codes_stamp, full=False)
        ):
            return None
    except OSError:
        return None
    return saved, graph, codes


_CRC_CHUNK = 1 << 22


def _stamp(path: Path) -> tuple[int, ...]:
    """What changes when anything writes to the file: inode, size, modification and change times."""
    status = path.stat()
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CRC_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _checks_out(path: Path, crc: int, stamp: tuple[int, ...], *, full: bool) -> bool:
    """Whether a graph or codes file is as written: by its stamp, else (or ``full``) by its CRC-32.

    Raises:
        OSError: it cannot be read.
    """
    if crc < 0:
        return True  # written before files had a checksum
    if not full and stamp and _stamp(path) == tuple(stamp):
        return True
    return _file_crc(path) == crc


def damaged_files(location: IndexLocation, scope: bytes) -> list[str]:
    """The saved index files of a tenant that do not match their checksums, one line each (for fsck)."""
    problems = []
    for name, found, header in saved_indexes(location):
        if found != scope or header is None:
            continue
        for file, crc, stamp in (
            (header.graph, header.graph_crc, header.graph_stamp),
            (header.codes, header.codes_crc, header.codes_stamp),
        ):
            path = location.path(file)
            try:
                if path.is_file() and _checks_out(path, crc, stamp, full=True):
                    continue
            except OSError:
                pass
            problems.append(
                f"the saved search index file {path} is damaged or missing (it does not match "
                f"its manifest {name}{ROWS}); the next semantic search rebuilds it"
            )
    return problems


def _parse(data: mmap.mmap) -> Saved | None:
    """A manifest's contents, or None when its framing, CRC or sizes are wrong."""
    size = len(data)
    if size < _PREFIX.size + _TRAILER.size:
        return None
    magic, version, length = _PREFIX.unpack_from(data, 0)
    crc, end = _TRAILER.unpack_from(data, size - _TRAILER.size)
    if magic != _MAGIC or version != FORMAT or end != _END:
        return None
    if zlib.crc32(memoryview(data)[: size - _TRAILER.size]) != crc:
        return None
    try:
        header = msgspec.msgpack.decode(data[_PREFIX.size : _PREFIX.size + length], type=Header)
    except msgspec.DecodeError:
        return None
    end = _PREFIX.size + length
    arrays: dict[str, np.ndarray] = {}
    for key, dtype, shape in _layout(header.count, header.live, header.isolated, header.dim):
        items = int(np.prod(shape))
        offset = _aligned(end)
        end = offset + items * np.dtype(dtype).itemsize
        if min(shape, default=0) < 0 or end > size - _TRAILER.size:
            return None
        arrays[key] = np.frombuffer(data, dtype=dtype, count=items, offset=offset).reshape(shape)
    if end != size - _TRAILER.size:
        return None
    order = arrays["order"].astype(np.intp)
    rows = arrays["isolated"].astype(np.intp)
    if (len(order) and int(order.max()) >= header.count) or (len(rows) and int(rows.max()) >= header.count):
        return None
    isolated = Isolated(header.dim, rows, arrays["vectors"], arrays["near"].astype(np.float64))
    return Saved(
        header,
        arrays["hashes"],
        arrays["block"].astype(np.uint32),  # copies: a handle writes these in place
        arrays["slot"].astype(np.uint8),
        arrays["alive"].astype(bool),
        order,
        isolated,
    )


def view_codes(codes: Path, count: int, dim: int) -> Codes | None:
    """A codes file, mapped read-only, as ``count`` rows of codes (None when it is not that)."""
    width = dim + SCALE_BYTES
    if count == 0:
        return np.zeros((0, width), dtype=np.int8)
    try:
        with open(codes, "rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    if len(data) != count * width:
        return None
    return np.frombuffer(data, dtype=np.int8).reshape(count, width)


def view(graph: Path, dim: int) -> tuple[Graph, memoryview] | None:
    """The saved graph, viewed over this process's own read-only mapping of its file.

    The mapping, not the path, is what the index reads, so a newer file renamed
    over the name later changes nothing under it. None when usearch refuses it.
    """
    try:
        with open(graph, "rb") as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        buffer = memoryview(data)  # holds the mapping for as long as the index reads it
        index = new_graph(dim, lookups=False)
        index.view(buffer)
    except (OSError, RuntimeError, ValueError):
        return None
    return index, buffer


@contextlib.contextmanager
def _locked(location: IndexLocation, name: str) -> Iterator[bool]:
    """Whether this process holds the save lock of ``name`` (another saving now: False, no wait)."""
    handle = os.open(location.path(name + LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                yield False
                return
            raise
        yield True
    finally:
        os.close(handle)  # releases the lock


def write(
    location: IndexLocation,
    header: Header,
    arrays: dict[str, np.ndarray],
    graph: Graph,
    codes: Callable[[int, int], Codes],
) -> tuple[Path, Path] | None:
    """Save an index: its graph under a new name, then its manifest over the old one.

    ``header`` names everything but the graph and codes files (filled in here);
    ``arrays`` are the manifest's arrays by name (see ``_layout``); ``codes(start,
    end)`` gives those rows' int8 copies.

    Returns:
        The new graph and codes files; None when the save did not happen: another process
        saving the same index at the moment, or a directory that cannot be
        written (read-only, full), leaves the files as they were (and what this
        save had written is removed).
    """
    scope, model = bytes.fromhex(header.scope), header.model
    name = location.name(scope, model)
    directory = Path(location.directory)
    made: list[Path] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _locked(location, name) as mine:
            if not mine:
                return None
            token = secrets.token_hex(8)
            graph_path = directory / f"{name}.{token}{GRAPH}"
            made.append(graph_path)
            graph.save(str(graph_path))
            _flush(graph_path)
            graph_crc = _file_crc(graph_path)  # from the page cache, just written
            codes_path = directory / f"{name}.{token}{CODES}"
            made.append(codes_path)
            codes_crc = _write_codes(codes_path, header.count, codes)
            header = msgspec.structs.replace(
                header,
                graph=graph_path.name,
                graph_bytes=graph_path.stat().st_size,
                graph_rows=len(graph),
                codes=codes_path.name,
                codes_bytes=codes_path.stat().st_size,
                graph_crc=graph_crc,
                codes_crc=codes_crc,
                graph_stamp=_stamp(graph_path),
                codes_stamp=_stamp(codes_path),
            )
            manifest = directory / f"{name}.{token}{ROWS}.tmp"
            made.append(manifest)
            _write_manifest(manifest, header, arrays)
            os.replace(manifest, directory / (name + ROWS))
            made.clear()
            _flush(directory)
            for old in directory.glob(f"{name}.*"):
                if old.name.endswith((GRAPH, CODES, ".tmp")) and not old.name.startswith(f"{name}.{token}."):
                    old.unlink(missing_ok=True)
            return graph_path, codes_path
    except (OSError, RuntimeError):  # a read-only or full disk, or usearch failing to write
        return None
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.unlink()


_CODES_CHUNK = 1 << 16
"""Rows of int8 copies written at a time."""


def _write_codes(path: Path, count: int, codes: Callable[[int, int], Codes]) -> int:
    """Write the codes file; return its CRC-32."""
    crc = 0
    with open(path, "wb") as out:
        for start in range(0, count, _CODES_CHUNK):
            chunk = np.ascontiguousarray(codes(start, min(count, start + _CODES_CHUNK)))
            out.write(chunk.data)  # the rows as they are: a view of the mapped file, or a copy
            crc = zlib.crc32(chunk.data, crc)
        out.flush()
        os.fsync(out.fileno())
    return crc


def _write_manifest(path: Path, header: Header, arrays: dict[str, np.ndarray]) -> None:
    encoded = msgspec.msgpack.encode(header)
    crc = 0
    with open(path, "wb") as out:

        def put(chunk: bytes | memoryview) -> None:
            nonlocal crc
            out.write(chunk)
            crc = zlib.crc32(chunk, crc)

        put(_PREFIX.pack(_MAGIC, FORMAT, len(encoded)) + encoded)
        offset = _PREFIX.size + len(encoded)
        for key, dtype, shape in _layout(header.count, header.live, header.isolated, header.dim):
            put(bytes(_aligned(offset) - offset))
            array = np.ascontiguousarray(arrays[key], dtype=dtype).reshape(shape)
            put(array.tobytes())
            offset = _aligned(offset) + array.nbytes
        out.write(_TRAILER.pack(crc, _END))
        out.flush()
        os.fsync(out.fileno())


def _flush(path: Path) -> None:
    """Flush a file's (or a directory's) contents to disk."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def remove(location: IndexLocation, scope: bytes, model: str | None = None) -> int:
    """Delete the saved index of ``model`` (every model, when None) of one tenant; return files deleted."""
    prefix = location.name(scope, model) if model is not None else f"{location.tag}{scope.hex()}-"
    return remove_named(location, prefix)


def remove_named(location: IndexLocation, prefix: str) -> int:
    """Delete every file of the index directory whose name starts with ``prefix``; return how many."""
    gone = 0
    with contextlib.suppress(OSError):
        for path in list(Path(location.directory).glob(prefix + "*")):
            with contextlib.suppress(OSError):
                path.unlink()
                gone += 1
    return gone


def saved_indexes(location: IndexLocation) -> Iterator[tuple[str, bytes, Header | None]]:
    """``(name, scope, header)`` of every manifest of this store in the directory.

    The header is None for a manifest that does not read back (torn, damaged).
    """
    directory = Path(location.directory)
    try:
        manifests = sorted(directory.glob(f"{location.tag}*{ROWS}"))
    except OSError:
        return
    for path in manifests:
        name = path.name[: -len(ROWS)]
        rest = name[len(location.tag) :]
        try:
            scope = bytes.fromhex(rest.split("-", 1)[0])
        except ValueError:
            continue  # another store's, in a shared cache
        saved: Saved | None = None
        try:
            with open(path, "rb") as handle:
                saved = _parse(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError):
            saved = None
        yield name, scope, saved.header if saved is not None else None
