"""Column contracts of the tidy tables: names carry their unit as a suffix (``_ms``, ``_bytes``,
``_pct``, ``_s``); loaders validate at the boundary and name what is missing."""

from __future__ import annotations

import tomllib
from importlib.resources import files

from yolo_sm.contract.errors import UserError

_FILE = files("yolo_sm.contract") / "columns.toml"


def _load() -> dict:
    """``columns.toml`` parsed and its column lists resolved, or a UserError naming the file."""
    try:
        data = tomllib.loads(_FILE.read_text(encoding="utf-8"))
        common, groups = data["common"], data["groups"]

        def columns(entries) -> dict[str, str]:
            out = {}
            for e in entries:
                if isinstance(e, dict):
                    out.update(e)
                elif e.startswith("+"):
                    out.update({c: common[c] for c in groups[e[1:]]})
                else:
                    out[e] = common[e]
            return out

        kinds = {k: {**v, "columns": columns(v["columns"])} for k, v in data["kind"].items()}
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError) as e:
        raise UserError(
            f"{_FILE} is not a valid column contract ({type(e).__name__}: {e})."
        ) from None
    return {**data, "kind": kinds}


_DATA = _load()
_KINDS = _DATA["kind"]
#: kind -> {column: description}, in the order writers emit the columns
SCHEMAS: dict[str, dict[str, str]] = {k: v["columns"] for k, v in _KINDS.items()}
#: kind -> the columns every table of the kind must have
REQUIRED = {k: tuple(v["required"]) for k, v in _KINDS.items()}
#: where a row was measured, recorded by `collect --workers` / `--scheduler` (optional)
PLACE_COLUMNS = tuple(_DATA["groups"]["place"])
#: the dataset name (and file stem) of a root's task log (collect --workers / --scheduler)
COLLECT_TASKS = "collect_tasks"
#: kinds of tables about a root's other datasets, not measurements of their own
DERIVED = tuple(k for k, v in _KINDS.items() if v.get("derived"))
#: kinds whose tables may hold no rows: a PyTorch trace on a CPU has no GPU kernels
EMPTY_OK = frozenset(k for k, v in _KINDS.items() if v.get("empty_ok"))
#: the columns that name a sweep point (a resumed sweep skips points whose key it holds)
KEY_COLUMNS = tuple(_DATA["key_columns"])
#: column types (text / flag / list / number) by name; a unit suffix means number
TYPES = {t: frozenset(_DATA["types"][t]) for t in ("text", "flag", "list", "number")}
UNIT_SUFFIXES = tuple(_DATA["types"]["unit_suffixes"])
#: per kind, columns whose type differs from the name's usual one
KIND_TYPES = {k: v["types"] for k, v in _KINDS.items() if "types" in v}


def column_type(kind: str, column: str) -> str | None:
    """The type ``column`` of a ``kind`` table must have (text / flag / list / number), or
    None when it is not checked."""
    if column in KIND_TYPES.get(kind, {}):
        return KIND_TYPES[kind][column]
    if column.startswith("prov_"):
        return None
    for name, group in TYPES.items():
        if column in group:
            return name
    return "number" if column.endswith(UNIT_SUFFIXES) else None


def _type_ok(series, want: str) -> bool:
    import numpy as np
    import pandas as pd
    from pandas.api import types as t

    values = series.dropna() if want != "list" else series[series.map(lambda v: v is not None)]
    if values.empty:
        return True
    if want == "number":
        return t.is_numeric_dtype(series) and not t.is_bool_dtype(series)
    if want == "flag":
        return t.is_bool_dtype(series) or all(isinstance(v, (bool, np.bool_)) for v in values)
    if want == "text":
        return t.is_string_dtype(series) and all(isinstance(v, str) for v in values)
    return all(isinstance(v, (list, tuple, np.ndarray, pd.Series)) for v in values)


def problems(df, kind: str) -> list[str]:
    """What is wrong with ``df`` as a ``kind`` table: missing required columns, columns of the
    wrong type, no rows (except the kinds of :data:`EMPTY_OK`)."""
    if kind not in REQUIRED:
        return [f"unknown table kind {kind!r}"]
    out = []
    missing = [c for c in REQUIRED[kind] if c not in df.columns]
    if missing:
        out.append(f"lacks required column(s): {', '.join(missing)}")
    wrong = wrong_types(df, kind)
    if wrong:
        out.append(f"has column(s) of the wrong type: {', '.join(wrong)}")
    if not len(df) and kind not in EMPTY_OK:
        out.append("holds no rows")
    return out


def wrong_types(df, kind: str) -> list[str]:
    """The columns of ``df`` of another type than a ``kind`` table holds, as ``name (dtype,
    expected type)``."""
    out = []
    for c in df.columns:
        want = column_type(kind, str(c))
        if want and not _type_ok(df[c], want):
            out.append(f"{c} ({df[c].dtype}, expected {want})")
    return out


def validate(df, kind: str, name: str | None = None, source=None):
    """``df``, or a UserError naming the table, its file (``source``) and its problems."""
    found = problems(df, kind)
    if found:
        where = f" ({source})" if source else ""
        raise UserError(f"{name or kind} table{where} " + "; ".join(found))
    return df
