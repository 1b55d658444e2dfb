"""Parquet tables on disk: checked output paths, atomic writes (temporary file + fsync +
rename, so a killed writer leaves the old file or the new one, never half of one), clean-up
of temporaries that killed writers left behind, and verified reads.

Every page is written with a CRC checksum (``write_page_checksum``) and every read here
verifies them (``page_checksum_verification``): a table whose bytes changed on disk (a bad
copy, a flipped bit, a truncated download) ends in one sentence naming the file, never in
silently wrong numbers. Tables written before checksums were stored read as they are."""

from __future__ import annotations

import os
from pathlib import Path

from yolo_sm.contract.errors import UserError


def check_output_path(out: str | os.PathLike) -> Path:
    """The parquet path, after checking that its folder can be written (without leaving files)."""
    out = Path(out)
    if out.is_dir():
        raise UserError(f"--out {out} is a directory; give a .parquet file path")
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = parent / f".{out.name}.{os.getpid()}.probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write to {parent}: {e.strerror or e}") from None
    return out


def read_frame(path: str | os.PathLike, columns=None):
    """The table at ``path`` as a DataFrame, its page checksums verified (``columns``: only
    these). A missing file, or one that is corrupt or truncated, is one UserError naming it."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise UserError(f"{path} does not exist")
    try:
        return pd.read_parquet(path, columns=columns, page_checksum_verification=True)
    except Exception as e:  # noqa: BLE001 - any parse failure means the same to the user
        raise _unreadable(path, e, "collect it again or restore it from a good copy") from None


def read_table(out: Path):
    """Rows already in the output table ``out`` (an empty frame when it does not exist), page
    checksums verified; an unreadable file is a UserError and is left untouched."""
    import pandas as pd

    out = Path(out)
    if not out.exists():
        return pd.DataFrame()
    try:
        return pd.read_parquet(out, page_checksum_verification=True)
    except Exception as e:  # noqa: BLE001
        raise _unreadable(out, e) from None


def read_arrow(out: Path):
    """``out`` as a pyarrow table, schema metadata included, page checksums verified; an
    unreadable file is the same UserError as :func:`read_table`'s and is left untouched."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(out, page_checksum_verification=True)
    except Exception as e:  # noqa: BLE001
        raise _unreadable(Path(out), e) from None


def _unreadable(
    out: Path, e: BaseException, advice: str = "move it away or choose another --out"
) -> UserError:
    detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
    return UserError(
        f"{out} exists but is not a readable parquet file: it is corrupt or truncated "
        f"({type(e).__name__}: {detail}); {advice}"
    )


def write_atomic(df, out: Path, metadata: dict | None = None) -> None:
    """Write ``df`` to ``out`` through a temporary file + fsync + rename (never a partial file)."""
    import json

    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    if metadata:
        meta = dict(table.schema.metadata or {})
        meta[b"yolo_sm"] = json.dumps(metadata, default=str).encode()
        table = table.replace_schema_metadata(meta)
    write_table_atomic(table, out)


def write_table_atomic(table, out: Path) -> None:
    """:func:`write_atomic` for a pyarrow table, its schema metadata kept as it is."""
    import pyarrow.parquet as pq

    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd", write_page_checksum=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves the old file and no temporary one
        raise


def remove_stale_partials(out: Path) -> list[Path]:
    """Delete the temporary files of :func:`write_atomic` that a killed run left beside ``out``
    (those whose writing process is gone); returns the paths removed."""
    import glob

    removed = []
    prefix, suffix = f".{out.name}.", ".partial"
    for tmp in out.parent.glob(f"{glob.escape(prefix)}*{suffix}"):
        pid = tmp.name[len(prefix) : -len(suffix)]
        if pid.isdigit() and not _process_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
