"""What provenance may say about the machine and person: the command as typed (paths relative
to the working folder), the host name only with ``--record-host`` (:data:`RECORD_HOST_ENV`).
:func:`scrub_root` rewrites a root written before, keeping every measured value."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from yolo_sm.contract.store import (
    DIGEST_KEY,
    read_arrow,
    with_metadata,
    write_table_atomic,
    write_text_atomic,
)

#: set to 1 by ``--record-host``: provenance then records the host name
RECORD_HOST_ENV = "YOLO_SM_RECORD_HOST"

#: how the package's own entry points appear as ``argv[0]`` (``python -m yolo_sm``, the
#: ``yolo-sm`` script, ``python yolo_sm/cli/main.py``)
OWN_PROGRAMS = ("yolo-sm", "__main__.py", "main.py", "yolo_sm")

#: the provenance fields that describe the host rather than the measurement
HOST_FIELDS = ("hostname",)


def record_host() -> bool:
    """Whether provenance records the host name (``--record-host``)."""
    return os.environ.get(RECORD_HOST_ENV, "") not in ("", "0")


def shown_path(text: str, cwd: str | os.PathLike | None = None) -> str:
    """An absolute path relative to ``cwd`` (``""``: its last component); others unchanged."""
    if not text.startswith("/"):
        return text
    if cwd == "":
        return Path(text).name or text
    base = os.fspath(cwd) if cwd is not None else os.getcwd()
    try:
        return os.path.relpath(text, base)
    except ValueError:
        return Path(text).name or text


def user_argv(argv, cwd: str | os.PathLike | None = None) -> list[str]:
    """``argv`` as a user would type it: ``yolo-sm`` or the program's file name first, every
    absolute path (alone or as ``--opt=/path``) through :func:`shown_path`."""
    argv = [str(a) for a in argv or []]
    if not argv:
        return []
    prog = Path(argv[0]).name
    head = "yolo-sm" if prog in OWN_PROGRAMS or argv[0].endswith("yolo_sm") else prog
    out = [head]
    for a in argv[1:]:
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            out.append(f"{k}={shown_path(v, cwd)}")
        else:
            out.append(shown_path(a, cwd))
    return out


def user_command(argv, cwd: str | os.PathLike | None = None) -> str:
    """:func:`user_argv` joined into one shell line (arguments quoted where needed)."""
    return " ".join(shlex.quote(a) for a in user_argv(argv, cwd))


_ABS = re.compile(r"(?<![\w.])/(?:[^\s\"',;]+)")


def scrub_command(text, cwd: str | os.PathLike | None = "") -> str:
    """A recorded command string as :func:`user_command` writes it; non-strings unchanged."""
    if not isinstance(text, str) or not text.strip():
        return text
    words = text.split(" ")
    first = Path(words[0]).name
    words[0] = "yolo-sm" if first in OWN_PROGRAMS else first
    rest = " ".join(words[1:])
    rest = _ABS.sub(lambda m: shown_path(m.group(0), cwd), rest)
    return " ".join([words[0], rest]) if rest else words[0]


def scrub_record(record: dict) -> dict:
    """A provenance mapping (nested ones likewise) without host fields, its ``command`` and
    ``argv`` the user's."""
    out = {}
    for k, v in record.items():
        if k in HOST_FIELDS:
            continue
        if k == "command":
            v = scrub_command(v)
        elif k == "argv" and isinstance(v, list):
            v = user_argv(v, cwd="")
        elif isinstance(v, dict):
            v = scrub_record(v)
        out[k] = v
    return out


def scrub_table(path: str | os.PathLike) -> bool:
    """Scrub one table's provenance (metadata, ``prov_command``; ``prov_hostname`` dropped),
    written atomically; returns whether it changed."""
    import pyarrow as pa

    table = read_arrow(path)
    changed = False
    if "prov_hostname" in table.column_names:
        table = table.drop_columns(["prov_hostname"])
        changed = True
    if "prov_command" in table.column_names:
        i = table.column_names.index("prov_command")
        old = table.column(i).to_pylist()
        new = [scrub_command(v) for v in old]
        if new != old:
            field = table.schema.field(i)
            table = table.set_column(i, field, pa.array(new, type=field.type))
            changed = True
    raw = (table.schema.metadata or {}).get(b"yolo_sm")
    if raw:
        meta = json.loads(raw)
        clean = scrub_record(meta) if isinstance(meta, dict) else meta
        if clean != meta:
            table = with_metadata(table, clean)
            changed = True
    if "pandas" in {k.decode() for k in (table.schema.metadata or {})}:
        table = _drop_pandas_column(table, "prov_hostname")
    if DIGEST_KEY not in (table.schema.metadata or {}):
        changed = True  # written before footers carried a digest: it gets one
    if changed:
        write_table_atomic(table, Path(path))
    return changed


def _drop_pandas_column(table, name: str):
    """``table`` without column ``name`` in its pandas metadata."""
    meta = dict(table.schema.metadata)
    pandas = json.loads(meta[b"pandas"])
    cols = [c for c in pandas.get("columns", []) if c.get("name") != name]
    if len(cols) == len(pandas.get("columns", [])):
        return table
    pandas["columns"] = cols
    meta[b"pandas"] = json.dumps(pandas).encode()
    return table.replace_schema_metadata(meta)


def scrub_json(path: str | os.PathLike) -> bool:
    """Rewrite a JSON provenance file by :func:`scrub_record`; returns whether it changed."""
    path = Path(path)
    data = json.loads(path.read_text())
    clean = scrub_record(data) if isinstance(data, dict) else data
    if clean == data:
        return False
    write_text_atomic(path, json.dumps(clean, indent=2, default=str) + "\n")
    return True


def scrub_root(folder: str | os.PathLike) -> list[Path]:
    """Scrub every ``*.parquet`` and ``*.json`` under ``folder``; returns the files changed."""
    changed = []
    for f in sorted(Path(folder).rglob("*")):
        if f.is_symlink() or not f.is_file() or f.name.startswith("."):
            continue
        if f.suffix == ".parquet" and scrub_table(f):
            changed.append(f)
        elif f.suffix == ".json" and scrub_json(f):
            changed.append(f)
    return changed
