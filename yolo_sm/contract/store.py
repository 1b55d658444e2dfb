"""Parquet tables on disk: checked paths, atomic writes (exclusive temp file + fsync + rename),
verified reads (page CRCs and a footer digest of schema and metadata), one writer per output
(:func:`output_lock`) and paths kept inside their root (:func:`inside`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import functools
import json
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.values import output_path

PARTIAL = ".partial"


def inside(root: str | os.PathLike, rel: str | os.PathLike, what: str) -> Path:
    """``root / rel`` once ``rel`` is checked to stay inside ``root``; ``what`` names it."""
    root = Path(root)
    text = os.fspath(rel) if isinstance(rel, (str, os.PathLike)) else None
    if not text or "\0" in text or Path(text).is_absolute():
        raise UserError(f"{what} must be a file name inside {root}, got {rel!r}")
    norm = os.path.normpath(text)
    if norm == "." or norm == ".." or norm.startswith("../"):
        raise UserError(f"{what} {text!r} points outside its folder {root}")
    return root / norm


def check_output_path(out: str | os.PathLike) -> Path:
    """The parquet path once :func:`~yolo_sm.contract.values.output_path` found it writable,
    its folder made."""
    out = output_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


_ADVICE = "move it away or choose another --out"


def _verified(path, read, advice: str = _ADVICE):
    """``read()`` of the table at ``path`` after :func:`check_digest`, or one UserError."""
    try:
        check_digest(path)
        return read()
    except Exception as e:  # noqa: BLE001 - any parse failure means the same to the user
        raise _unreadable(Path(path), e, advice) from None


def read_frame(
    path: str | os.PathLike,
    columns=None,
    advice: str = "collect it again or restore it from a good copy",
):
    """The table at ``path`` as a DataFrame, page checksums verified (``columns``: only these);
    missing, corrupt or truncated is one UserError."""
    import pandas as pd

    if not Path(path).exists():
        raise UserError(f"{path} does not exist")
    read = functools.partial(
        pd.read_parquet, path, columns=columns, page_checksum_verification=True
    )
    return _verified(path, read, advice)


def read_table(out: Path):
    """Rows already in the output table ``out`` (empty when absent), as :func:`read_frame`."""
    import pandas as pd

    return read_frame(out, advice=_ADVICE) if Path(out).exists() else pd.DataFrame()


def read_arrow(out: Path):
    """``out`` as a pyarrow table (schema metadata included), checksums verified."""
    import pyarrow.parquet as pq

    return _verified(out, lambda: pq.read_table(out, page_checksum_verification=True))


DIGEST_KEY = b"yolo_sm_digest"


def schema_digest(schema) -> str:
    """SHA-256 (hex) of a schema's column names, types and key-value metadata (but the digest
    itself and Arrow's own serialised schema)."""
    import hashlib

    h = hashlib.sha256()
    for f in schema:  # a list's item field is named "item" in memory, "element" once read
        kind = re.sub(r"list<\w+: ", "list<", str(f.type))
        h.update(f"{f.name}\0{kind}\0{f.nullable}\n".encode())
    for k, v in sorted((schema.metadata or {}).items()):
        if k not in (DIGEST_KEY, b"ARROW:schema"):
            h.update(k + b"\0" + v + b"\n")
    return h.hexdigest()


class DigestMismatch(ValueError):
    """A table's footer does not match its digest: a column name, type or metadata changed."""


def check_digest(path) -> None:
    """Raise :class:`DigestMismatch` when the footer at ``path`` fails its digest (if any)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    stored = (schema.metadata or {}).get(DIGEST_KEY)
    if stored is not None and stored.decode(errors="replace") != schema_digest(schema):
        raise DigestMismatch("its footer (column names, types or metadata) fails its digest")


def with_digest(table):
    """``table`` with :func:`schema_digest` stored in its metadata (written by every write)."""
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if k != DIGEST_KEY}
    table = table.replace_schema_metadata(meta)
    return table.replace_schema_metadata({**meta, DIGEST_KEY: schema_digest(table.schema).encode()})


def read_metadata(path: str | os.PathLike) -> dict:
    """The ``yolo_sm`` key of a parquet file's metadata (empty: none, or an unreadable footer)."""
    import pyarrow.parquet as pq

    try:
        check_digest(path)
        raw = (pq.read_schema(path).metadata or {}).get(b"yolo_sm")
        meta = json.loads(raw) if raw else {}
    except Exception:  # noqa: BLE001 - an unreadable footer holds no usable metadata
        return {}
    return meta if isinstance(meta, dict) else {}


def _unreadable(out: Path, e: BaseException, advice: str) -> UserError:
    detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
    return UserError(
        f"{out} exists but is not a readable parquet file: it is corrupt or truncated "
        f"({type(e).__name__}: {detail}); {advice}"
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "wb", **kwargs):
    """Write to an exclusive temp file beside ``path``, then fsync and rename over it; on error
    the temp file is removed and ``path`` left as it was."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.{os.getpid()}.", suffix=PARTIAL)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def temp_path(path: str | os.PathLike, suffix: str = PARTIAL) -> Path:
    """A new, exclusively created temporary file beside ``path`` for a program that writes it
    itself (``ncu --log-file``); the caller renames it over ``path`` or removes it."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.{os.getpid()}.", suffix=suffix)
    os.close(fd)
    return Path(tmp)


def copy_atomic(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copy ``source`` to ``path`` through a renamed :func:`temp_path` (never through a link)."""
    tmp = temp_path(path)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through :func:`atomic_file`."""
    with atomic_file(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_atomic(df, out: Path, metadata: dict | None = None) -> None:
    """Write ``df`` to ``out`` through a temporary file + fsync + rename (never a partial file)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        table = with_metadata(table, metadata)
    write_table_atomic(table, out)


def with_metadata(table, metadata: dict):
    """``table`` with ``metadata`` as its ``yolo_sm`` key-value metadata (JSON)."""
    meta = dict(table.schema.metadata or {})
    meta[b"yolo_sm"] = json.dumps(metadata, default=str).encode()
    return table.replace_schema_metadata(meta)


def write_table_atomic(table, out: Path) -> None:
    """:func:`write_atomic` for a pyarrow table, its schema metadata kept as it is."""
    import pyarrow.parquet as pq

    table = with_digest(table)
    with atomic_file(out, "wb") as fh:
        pq.write_table(table, fh, compression="zstd", write_page_checksum=True)


def remove_stale_partials(out: Path) -> list[Path]:
    """Delete the temporary files a killed writer left beside ``out``; returns those removed."""
    import glob

    removed = []
    prefix = f".{out.name}."
    for tmp in out.parent.glob(f"{glob.escape(prefix)}*{PARTIAL}"):
        pid = tmp.name[len(prefix) : -len(PARTIAL)].split(".")[0]
        if pid.isdigit() and not process_alive(int(pid)) and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass
    return True


# --- one writer per output --------------------------------------------------------------------

_HELD: dict[str, list] = {}  # lock path -> [fd, depth] of the locks this process holds


def lock_path(out: str | os.PathLike) -> Path:
    """``.<name>.lock`` beside output file ``out``, ``.yolo_sm.lock`` inside a folder."""
    out = Path(out)
    return out / ".yolo_sm.lock" if out.is_dir() else out.with_name(f".{out.name}.lock")


def lock_holder(out: str | os.PathLike) -> dict | None:
    """The holder (``pid``, ``host``, ``started``) in ``out``'s lock file, or None."""
    try:
        return json.loads(lock_path(out).read_text()) or None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def output_lock(out: str | os.PathLike, wait: bool = False):
    """Hold output ``out``'s one-writer ``flock`` (released when the holder dies); a second
    writer gets one UserError naming the holder, or with ``wait`` waits for it. Re-entrant."""
    path = lock_path(out)
    key = str(path.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield path
        finally:
            _HELD[key][1] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UserError(f"{path} is a symlink; remove it before writing {out}") from None
            raise UserError(f"cannot write to {path.parent}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = _read_fd(fd)
            os.close(fd)
            raise UserError(_busy(out, holder, path)) from None
        try:  # the file may have been removed by the holder that just released it
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    holder = _read_fd(fd)
    if holder and holder.get("host") != me["host"]:
        # a lock left by another host (on a shared folder): its process cannot be checked here
        os.close(fd)
        raise UserError(_busy(out, holder, path, other_host=True))
    os.ftruncate(fd, 0)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    os.pwrite(fd, json.dumps({**me, "started": started}).encode(), 0)
    _HELD[key] = [fd, 1]
    try:
        yield path
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)  # releases the flock


def _read_fd(fd: int) -> dict | None:
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data) if data else None
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _busy(out, holder: dict | None, path: Path, other_host: bool = False) -> str:
    who = "another process"
    if holder:
        who = f"process {holder.get('pid')} on {holder.get('host')} (since {holder.get('started')})"
    if other_host:
        return (
            f"{out} is locked by {who}, another host; wait for it to finish or, if no run is "
            f"active there, remove {path}"
        )
    return f"{out} is being written by {who}; wait for it to finish or choose another --out"
