"""torch.compile's on-disk caches: where they live (:func:`setup`) and whether a build found its
graphs there (:class:`Probe`: ``warm``, ``cold`` or ``partial``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from yolo_sm.contract.values import split_compile_mode
from yolo_sm.core.engines.config import cache_home

ENV_DIR = "TORCHINDUCTOR_CACHE_DIR"
#: what :func:`setup` chose in this process (the folder is fixed at the first compile)
_CHOSEN: dict = {}


def setup(cache_dir: str | None = None, environ=None) -> dict:
    """Choose inductor's cache folder (``TORCHINDUCTOR_CACHE_DIR``, else ``inductor/`` in the
    cache), switch its FX graph and autotune caches on; ``{"dir", "dir_source", ...}``."""
    env = os.environ if environ is None else environ
    if _CHOSEN and environ is None and env.get(ENV_DIR) == _CHOSEN["dir"]:
        return dict(_CHOSEN)
    if env.get(ENV_DIR) and not _torch_default(env[ENV_DIR]):
        folder, source = env[ENV_DIR], "user"
    else:
        folder, source = os.path.abspath(cache_home(cache_dir) / "inductor"), "yolo_sm"
        env[ENV_DIR] = folder
        utils = sys.modules.get("torch._inductor.utils")
        if environ is None and utils is not None:
            utils.clear_caches()  # what inductor derived from an earlier folder in this process
    Path(folder).mkdir(parents=True, exist_ok=True)
    import torch._inductor.config as icfg

    if "TORCHINDUCTOR_FX_GRAPH_CACHE" not in env:
        icfg.fx_graph_cache = True
    if "TORCHINDUCTOR_AUTOTUNE_LOCAL_CACHE" not in env:
        icfg.autotune_local_cache = True
    out = {"dir": folder, "dir_source": source, "fx_graph_cache": bool(icfg.fx_graph_cache)}
    out["autotune_local_cache"] = bool(icfg.autotune_local_cache)
    if environ is None:
        _CHOSEN.clear()
        _CHOSEN.update(out)
    return out


def _torch_default(folder: str) -> bool:
    """Whether ``folder`` is torch's own default, which importing ``torch._dynamo`` sets."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return os.path.abspath(folder) == os.path.abspath(default_cache_dir())


def count_files(folder: str | os.PathLike) -> int:
    """Files under ``folder`` (0 when it does not exist)."""
    return sum(len(files) for _, _, files in os.walk(folder))


def counters() -> tuple[int, int, int]:
    """Inductor's FX graph cache hits and misses, and the ops it autotuned, so far."""
    from torch._dynamo.utils import counters as c

    names = ("fxgraph_cache_hit", "fxgraph_cache_miss", "select_algorithm_autotune")
    return tuple(int(c["inductor"].get(k, 0)) for k in names)


def autotunes(compile_mode: str | None) -> bool:
    """Whether ``compile_mode`` (``+rewrite`` suffix allowed) is a ``max-autotune`` mode."""
    return split_compile_mode(compile_mode or "")[0].startswith("max-autotune")


def tuned_here(delta: int, hits: int, misses: int, tunes: bool = True) -> int | None:
    """Ops a build autotuned itself: the counter ``delta`` where no graph was read, 0 where all
    were read, None where mixed or the mode does not autotune."""
    if not tunes or (hits and misses):
        return None
    return 0 if hits else int(delta)


def state(hits, misses, files_before, files_after, autotuned_ops=None, autotune_reads=None):
    """``warm``, ``cold`` or ``partial`` from FX-cache ``hits``/``misses`` (else from files); a
    cold build that read autotuning from disk, or tuned nothing in a full folder, is partial."""
    if hits or misses:
        if not misses:
            return "warm"
        if hits or autotune_reads:
            return "partial"
        return "partial" if autotuned_ops == 0 and files_before else "cold"
    if files_before == 0:
        return "cold"
    return "warm" if files_after <= files_before else "partial"


class AutotuneReads:
    """``with AutotuneReads() as r:`` counts in ``r.n`` the ops whose autotuning was read from
    inductor's local autotune cache (inductor counts none); None where torch lacks the hook."""

    def __init__(self):
        self.n: int | None = None
        self._cls = self._orig = None

    def __enter__(self):
        try:
            from torch._inductor.codecache import PersistentCache
        except ImportError:
            return self
        orig = PersistentCache.__dict__.get("lookup")
        if orig is None:
            return self
        self.n, self._cls, self._orig = 0, PersistentCache, orig
        tuned = set()  # (op, inputs) this build benchmarked: a later lookup reads its own

        def lookup(cache, *args, **kwargs):
            named = dict(zip(("choices", "op", "inputs", "benchmark"), args, strict=False))
            named.update(kwargs)
            key = (named.get("op"), named.get("inputs"), named.get("hint_override"))
            before = counters()[2]  # ops inductor benchmarked so far
            out = orig(cache, *args, **kwargs)
            if counters()[2] != before:
                tuned.add(key)
            elif named.get("benchmark") is not None and key not in tuned:
                self.n += 1
            return out

        PersistentCache.lookup = lookup
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            self._cls.lookup = self._orig
        return False


class Probe:
    """``with Probe(folder, mode) as p: compile...``; ``p.info()``: cache state, hits, misses,
    files before/after, ``autotuned_ops`` and ``autotune_reads``."""

    def __init__(self, folder: str | os.PathLike, compile_mode: str | None = None):
        self.folder = folder
        self.tunes = autotunes(compile_mode)
        self._reads = AutotuneReads() if self.tunes else None

    def __enter__(self):
        self.files_before = count_files(self.folder)
        self.start = counters()
        if self._reads is not None:
            self._reads.__enter__()
        return self

    def __exit__(self, *exc):
        if self._reads is not None:
            self._reads.__exit__(*exc)
        self.files_after = count_files(self.folder)
        hits, misses, tuned = (b - a for a, b in zip(self.start, counters(), strict=True))
        self.hits, self.misses = hits, misses
        self.tuned = tuned_here(tuned, hits, misses, self.tunes)
        self.reads = self._reads.n if self._reads is not None else None
        return False

    def info(self) -> dict:
        found = state(
            self.hits, self.misses, self.files_before, self.files_after, self.tuned, self.reads
        )
        return {
            "compile_cache": found,
            "fx_cache_hits": self.hits,
            "fx_cache_misses": self.misses,
            "cache_files_before": self.files_before,
            "cache_files_after": self.files_after,
            "autotuned_ops": self.tuned,
            "autotune_reads": self.reads,
        }
