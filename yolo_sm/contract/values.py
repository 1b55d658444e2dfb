"""Values a user gives (a flag, a config or plan key, a file), checked before any work starts:
each checker takes the raw value and the name to quote, and returns it in its type or raises a
UserError naming it. Numbers are finite and in range; booleans are not numbers; a list is a
comma string, a YAML list or one scalar."""

from __future__ import annotations

import datetime
import errno
import math
import os
import re
import reprlib
import tempfile
from dataclasses import MISSING, field, fields
from pathlib import Path

from yolo_sm.contract.errors import UserError
from yolo_sm.contract.vocab import COMPILE_MODES, COMPILE_REWRITES

#: largest config or plan file read (bytes): a bigger one is not a config
MAX_TEXT_BYTES = 1 << 20
#: longest file or folder name an ``--out`` may have: temporary and lock files add to it
MAX_NAME_CHARS = 200
#: most values one list flag or key may hold
MAX_ITEMS = 4096
#: the device names the package runs on
DEVICE = re.compile(r"cpu|cuda(:[0-9]{1,2})?")


def _num(x) -> str:
    """A bound or value as a message shows it: whole numbers in full, others as ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _range_text(lo, hi, above, unit: str) -> str:
    u = f" {unit}" if unit else ""
    if above is not None and hi is not None:
        return f"above {_num(above)} and at most {_num(hi)}{u}"
    if above is not None:
        return f"above {_num(above)}{u}"
    if lo is not None and hi is not None:
        return f"between {_num(lo)} and {_num(hi)}{u}"
    if lo is not None:
        return f"at least {_num(lo)}{u}"
    return f"at most {_num(hi)}{u}"


def _check_range(x: float, what: str, lo, hi, above, unit: str) -> None:
    if (
        (lo is not None and x < lo)
        or (hi is not None and x > hi)
        or (above is not None and x <= above)
    ):
        raise UserError(f"{what} must be {_range_text(lo, hi, above, unit)}, got {_num(x)}")


def _as_float(v, what: str, kind: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise UserError(f"{what} must be {kind}, got {_show(v)}")
    try:
        x = float(v.strip() if isinstance(v, str) else v)
    except (ValueError, OverflowError):
        raise UserError(f"{what} must be {kind}, got {_show(v)}") from None
    if not math.isfinite(x):
        raise UserError(f"{what} must be a finite number, got {_show(v)}")
    return x


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 3, 8, 8, 60, 60


def _show(v) -> str:
    """A value as quoted in a message: its abridged repr, at most 60 characters."""
    text = _REPR.repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def number(v, what: str, *, lo=None, hi=None, above=None, unit: str = "") -> float:
    """A finite number in ``[lo, hi]`` (``above``: strictly greater than it)."""
    x = _as_float(v, what, "a number")
    _check_range(x, what, lo, hi, above, unit)
    return x


def whole(v, what: str, *, lo=None, hi=None, unit: str = "") -> int:
    """A whole number in ``[lo, hi]`` (``"8"``, ``8``, ``8.0``; not ``8.5``, ``True``)."""
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,30}\s*", v):
        n = int(v)
    else:
        x = _as_float(v, what, "a whole number")
        if x != int(x):
            raise UserError(f"{what} must be a whole number, got {_show(v)}")
        n = int(x)
    _check_range(n, what, lo, hi, None, unit)
    return n


def items(v, what: str) -> list:
    """A comma string, a list or one scalar -> a non-empty list of scalars."""
    if isinstance(v, str):
        out = [x.strip() for x in v.split(",") if x.strip()]
    elif isinstance(v, (list, tuple)):
        out = list(v)
    else:
        out = [v]
    if not out:
        raise UserError(f"{what} needs at least one value")
    if len(out) > MAX_ITEMS:
        raise UserError(f"{what} has {len(out)} values, more than {MAX_ITEMS}")
    for x in out:
        if isinstance(x, (list, tuple, dict, set)) or x is None:
            raise UserError(f"{what} takes plain values, got {_show(x)}")
    return out


def numbers(v, what: str, **limits) -> list[float]:
    """:func:`items` of :func:`number` (the same ``lo`` / ``hi`` / ``above`` / ``unit``)."""
    return [number(x, what, **limits) for x in items(v, what)]


def wholes(v, what: str, **limits) -> list[int]:
    """:func:`items` of :func:`whole` (the same ``lo`` / ``hi`` / ``unit``)."""
    return [whole(x, what, **limits) for x in items(v, what)]


def text(v, what: str, choices=None) -> str:
    """A non-empty line of text; ``choices``: one of them (compared lower-case)."""
    if isinstance(v, bool) or v is None or isinstance(v, (list, tuple, dict, set)):
        raise UserError(f"{what} must be text, got {_show(v)}")
    if isinstance(v, (datetime.date, datetime.time)):
        raise UserError(f"{what} must be text, got the date {v}")
    s = str(v).strip()
    if not s or "\x00" in s or len(s) > 1000:
        raise UserError(f"{what} must be a non-empty line of text, got {_show(v)}")
    if choices is not None and s.lower() not in choices:
        raise UserError(f"{what} must be one of {', '.join(choices)}, got {s!r}")
    return s.lower() if choices is not None else s


def split_compile_mode(mode: str) -> tuple[str, tuple[str, ...]]:
    """``reduce-overhead+sep-pool`` -> (``reduce-overhead``, (``sep-pool``,)), unchecked."""
    torch_mode, *rewrites = str(mode).split("+")
    return torch_mode, tuple(rewrites)


def compile_mode(v, what: str) -> str:
    """A torch.compile mode, then each ``+rewrite`` of ``vocab.COMPILE_REWRITES`` at most once."""
    s = text(v, what).lower()
    torch_mode, rewrites = split_compile_mode(s)
    if torch_mode not in COMPILE_MODES:
        raise UserError(
            f"unknown compile mode {torch_mode!r} ({what}): choose one of "
            f"{', '.join(COMPILE_MODES)}, optionally followed by +{' +'.join(COMPILE_REWRITES)}"
        )
    bad = [r for r in rewrites if r not in COMPILE_REWRITES]
    if bad or len(set(rewrites)) != len(rewrites):
        raise UserError(
            f"{what} {s!r} names an unknown or repeated rewrite: after a compile mode, each "
            f"of +{' +'.join(COMPILE_REWRITES)} may follow once"
        )
    return s


def texts(v, what: str, choices=None) -> list[str]:
    """:func:`items` of :func:`text`."""
    return [text(x, what, choices) for x in items(v, what)]


def flag(v, what: str) -> bool:
    """``true/false, yes/no, on/off, 1/0`` (any case) or a bool."""
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower() if isinstance(v, (str, int)) else None
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise UserError(f"{what} must be true or false, got {_show(v)}")


def mapping(v, what: str) -> dict:
    """A mapping whose keys are text."""
    if not isinstance(v, dict):
        raise UserError(f"{what} must be a mapping of names to values, got {_show(v)}")
    bad = [k for k in v if not isinstance(k, str)]
    if bad:
        raise UserError(f"{what} has a key that is not a name: {_show(bad[0])}")
    return v


def device_name(v, what: str = "--device") -> str:
    """``cpu``, ``cuda`` or ``cuda:N``: the devices the package runs on."""
    s = text(v, what)
    if not DEVICE.fullmatch(s):
        raise UserError(f"{what} must be cpu, cuda or cuda:N, got {s!r}")
    return s


# --- files ----------------------------------------------------------------------------------


def _os_reason(e: OSError) -> str:
    return e.strerror or type(e).__name__


def read_text(path, what: str = "config file") -> str:
    """The text of a config or plan file: a regular UTF-8 file of at most
    :data:`MAX_TEXT_BYTES` without NUL bytes, else a UserError naming it."""
    p = Path(path)
    try:
        if not p.exists():
            raise UserError(f"{what} {path} does not exist")
        if not p.is_file():
            raise UserError(f"{what} {path} is not a regular file")
        with open(p, "rb") as fh:
            raw = fh.read(MAX_TEXT_BYTES + 1)
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {_os_reason(e)}") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise UserError(f"{what} {path} is larger than {MAX_TEXT_BYTES >> 20} MiB: not a config")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(f"{what} {path} is UTF-16 text; save it as UTF-8")
    try:
        body = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{what} {path} is not UTF-8 text (a binary file?)") from None
    if "\x00" in body:
        raise UserError(f"{what} {path} holds NUL bytes: a binary file, not YAML")
    return body


def _nearest_existing(p: Path) -> Path:
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def output_path(path, what: str = "--out", *, folder: bool = False) -> Path:
    """``path`` as an output file (with ``folder``: folder) once it is known that it can be
    written: nothing is created (a probe file is removed at once), names are short enough."""
    raw = str(path)
    if not raw.strip() or "\x00" in raw:
        raise UserError(f"{what} must be a path, got {raw!r}")
    p = Path(raw).expanduser()
    for part in p.parts:
        if len(part) > MAX_NAME_CHARS:
            raise UserError(
                f"{what} has a name of {len(part)} characters; names are at most "
                f"{MAX_NAME_CHARS} characters"
            )
    if p.exists():
        if folder and not p.is_dir():
            raise UserError(f"{what} {p} is a file; give a folder")
        if not folder and p.is_dir():
            raise UserError(f"{what} {p} is a directory; give a file path")
    # where files are created: inside an output folder, beside an output file
    base = _nearest_existing(p.absolute() if folder else p.absolute().parent)
    if not base.is_dir():
        raise UserError(f"cannot write {what} {p}: {base} is a file, not a folder")
    for part in p.absolute().relative_to(base).parts:
        if len(part) > _name_max(base):
            raise UserError(f"cannot write {what} {p}: the name {part[:40]}... is too long")
    try:
        fd, probe = tempfile.mkstemp(prefix=".yolo_sm-", suffix=".probe", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        reason = _os_reason(e)
        raise UserError(f"cannot write {what} {p}: {base} is not writable ({reason})") from None
    if p.exists() and not os.access(p, os.W_OK):
        raise UserError(f"cannot write {what} {p}: it is read-only")
    return p


def os_error_sentence(e: OSError) -> str:
    """One sentence for an ``OSError``: what happened to which file and what to do."""
    where = f" {e.filename}" if e.filename else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        writing = f" writing {e.filename}" if e.filename else ""
        return f"no space left on the device{writing}: free some space or choose another --out"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write{where}: {_os_reason(e).lower()}; choose another --out"
    if e.errno == errno.ENAMETOOLONG:
        return f"a file name is too long{where}: choose a shorter --out"
    return f"{_os_reason(e)}{where} ({type(e).__name__})"


def environment(caching: bool) -> None:
    """Check the environment variables the package reads (with ``caching``: the cache and
    config folders too), one UserError naming a bad one."""
    env = os.environ
    if "YOLO_SM_THREADS" in env:
        whole(env["YOLO_SM_THREADS"], "environment variable YOLO_SM_THREADS", lo=0, hi=4096)
    data = env.get("YOLO_SM_DATA")
    if data is not None and not Path(data).is_dir():
        raise UserError(f"environment variable YOLO_SM_DATA must name a folder, got {data!r}")
    ncu = env.get("YOLO_SM_NCU")
    if ncu is not None and not (Path(ncu).is_file() and os.access(ncu, os.X_OK)):
        raise UserError(f"environment variable YOLO_SM_NCU must name the ncu program, got {ncu!r}")
    if not caching:
        return
    if "YOLO_SM_CACHE" in env:
        output_path(env["YOLO_SM_CACHE"], "environment variable YOLO_SM_CACHE", folder=True)
    else:
        home = env.get("HOME", "")
        if not home or not os.path.isabs(home) or "\x00" in home:
            raise UserError(
                f"environment variable HOME must be an absolute folder (the cache is "
                f"~/.cache/yolo_sm), got {home!r}: set HOME or YOLO_SM_CACHE"
            )
        output_path(Path(home) / ".cache" / "yolo_sm", "the cache folder under HOME", folder=True)
    config = env.get("YOLO_CONFIG_DIR")  # set from HOME on import unless the user set it
    if config is not None and not os.path.isabs(config):
        raise UserError(f"environment variable YOLO_CONFIG_DIR must be absolute, got {config!r}")
    if config is not None:
        output_path(config, "environment variable YOLO_CONFIG_DIR", folder=True)


# --- the checks step specs and flags share --------------------------------------------------

#: longest warm-up per timed point (ms): 1 minute
MAX_WARMUP_MS = 60_000.0
#: longest timed budget per point (ms): 10 minutes
MAX_BUDGET_MS = 600_000.0
#: longest wall time of one timed row (a pipeline, a predict loop, a GPM run; s): 10 minutes
MAX_RUN_S = 600.0
#: largest batch a flag or plan may ask for
MAX_BATCH = 65_536
#: largest square input size (pixels)
MAX_IMGSZ = 8192
#: widest width multiplier any model family takes (each family checks its own range)
MAX_WIDTH_ANY = 16.0
PRESETS = ("n", "s", "m", "l", "x")


def check(fn, **limits):
    """``fn(v, what, **limits)`` as a check of one field: ``check(numbers, above=0)``."""
    return lambda v, what: fn(v, what, **limits)


def one(fn):
    """A check of a list, for a key that takes exactly one value."""

    def single(v, what):
        got = fn(v, what)
        if len(got) != 1:
            raise UserError(f"{what} takes one value, got {len(got)}")
        return got[0]

    return single


def widths(v, what):
    """Width multipliers, or preset letters n/s/m/l/x."""
    return [
        x.strip().lower()
        if isinstance(x, str) and x.strip().lower() in PRESETS
        else number(x, what, above=0, hi=MAX_WIDTH_ANY)
        for x in items(v, what)
    ]


def imgszs(v, what):
    """Square input sizes: multiples of 32 pixels."""
    out = wholes(v, what, lo=32, hi=MAX_IMGSZ, unit="pixels")
    if any(s % 32 for s in out):
        raise UserError(f"{what} must be multiples of 32, got {','.join(map(str, out))}")
    return out


multipliers = check(numbers, above=0, hi=MAX_WIDTH_ANY)
multiplier = check(number, above=0, hi=MAX_WIDTH_ANY)
batches = check(wholes, lo=1, hi=MAX_BATCH)
batch = check(whole, lo=1, hi=MAX_BATCH)
imgsz = one(imgszs)
warmup_ms = check(number, lo=0, hi=MAX_WARMUP_MS, unit="ms")
budget_ms = check(number, above=0, hi=MAX_BUDGET_MS, unit="ms")
run_s = check(number, above=0, hi=MAX_RUN_S, unit="s")
gap_s = check(number, lo=0, hi=60, unit="s")
seconds = check(number, above=0, hi=7 * 86400, unit="s")
seed = check(whole, lo=0, hi=2**32 - 1)


def param(check, default=None, help: str = "", flag: str = ""):
    """A spec field checked by ``check(value, what)``; ``help`` and ``flag`` for the CLI."""
    return field(default=default, metadata={"check": check, "help": help, "flag": flag})


class Spec:
    """A step kind's frozen spec: each field a :func:`param`, parsed once from a plan step's
    params or a command's flags."""

    kind = ""

    @classmethod
    def params(cls) -> dict:
        return {f.name: f for f in fields(cls) if "check" in f.metadata}

    @classmethod
    def from_mapping(cls, data, where: str = "", *, flags: bool = False):
        """The spec of ``data`` (None: the default); a bad key or value is one UserError."""
        where = where or cls.kind or cls.__name__
        known = cls.params()
        unknown = sorted(set(mapping(data, f"{where} params")) - set(known))
        if unknown:
            raise UserError(
                f"{where} has unknown {cls.kind} parameter(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        kw = {}
        for k, v in data.items():
            if v is not None:
                f = known[k]
                what = (
                    (f.metadata["flag"] or "--" + k.replace("_", "-")) if flags else f"{where} {k}"
                )
                got = f.metadata["check"](v, what)
                kw[k] = tuple(got) if isinstance(got, list) else got
        return cls(**kw).validated()

    def validated(self):
        """Checks across fields (none by default)."""
        return self

    @classmethod
    def add_options(cls, parser, names=None) -> None:
        """One ``--flag`` per field (of ``names``), checked by :meth:`from_mapping`."""
        for name, f in cls.params().items():
            if names is None or name in names:
                default = f.default if f.default is not MISSING else None
                shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
                more = f" (default {shown})" if shown not in (None, "", "None") else ""
                flag = f.metadata["flag"] or "--" + name.replace("_", "-")
                parser.add_argument(flag, dest=name, help=f.metadata["help"] + more or None)
