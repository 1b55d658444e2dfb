"""torch.compile's on-disk caches: where they live and whether a build found its graphs there.

TorchInductor keeps compiled FX graphs (the FX graph cache), autotuning results and Triton
kernels under one folder, ``TORCHINDUCTOR_CACHE_DIR``. :func:`setup` chooses it before the
first compile of a process: a ``TORCHINDUCTOR_CACHE_DIR`` the user set is kept as it is
(one naming torch's own default folder is not taken as the user's: importing ``torch._dynamo``
writes that one there); otherwise ``inductor/`` under the package's cache root
(``EngineConfig.cache_dir``, else ``$YOLO_SM_CACHE``, else ``~/.cache/yolo_sm``: the root of
the ONNX exports and TensorRT plans too). The FX graph cache and the local autotune cache
are switched on unless the user's environment (``TORCHINDUCTOR_FX_GRAPH_CACHE``,
``TORCHINDUCTOR_AUTOTUNE_LOCAL_CACHE``) says otherwise, so that a second process compiling
the same graph reads it from disk.

:func:`state` says what a build found: ``warm`` (every graph read from the cache), ``cold``
(every graph compiled afresh) or ``partial``, from inductor's cache hit and miss counters, or
where they did not move (the cache bypassed) from the number of files in the folder before
and after the build. A mode that autotunes (``max-autotune*``) keeps its autotuning results in
the same folder apart from the graphs: a build that compiled its graphs afresh but read any
op's autotuning from the local autotune cache (:class:`AutotuneReads`: inductor counts no such
read), or autotuned no op at all (inductor's ``select_algorithm_autotune`` counter, which moves
only when an op's choices are benchmarked), found autotuning on disk and is ``partial``, not
``cold``. A graph read from the FX graph cache replays the counters its
compile moved (``codecache``: ``counters["inductor"] += graph.counter_deltas``), so the
counter is the build's own only where no graph was read: a build whose every graph was read
autotuned nothing, and one that read some graphs and compiled others is not counted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from yolo_sm.contract.values import split_compile_mode

ENV_DIR = "TORCHINDUCTOR_CACHE_DIR"
ENV_FX = "TORCHINDUCTOR_FX_GRAPH_CACHE"
ENV_AUTOTUNE = "TORCHINDUCTOR_AUTOTUNE_LOCAL_CACHE"
CACHE_STATES = ("cold", "warm", "partial")

#: what :func:`setup` chose in this process (the folder is fixed at the first compile)
_CHOSEN: dict = {}


def default_dir(cache_dir: str | None = None) -> Path:
    """``inductor/`` under the package's cache root (``cache_dir``, ``$YOLO_SM_CACHE`` or
    ``~/.cache/yolo_sm``)."""
    root = cache_dir or os.environ.get("YOLO_SM_CACHE") or Path.home() / ".cache" / "yolo_sm"
    return Path(root) / "inductor"


def setup(cache_dir: str | None = None, environ=None) -> dict:
    """Choose inductor's cache folder and switch its disk caches on, before compiling:
    returns ``{"dir", "dir_source" (user / yolo_sm), "fx_graph_cache", "autotune_local_cache"}``.
    A folder the environment names already (the user's, or one chosen earlier in this
    process) is kept, unless it is torch's own default (:func:`_torch_default`). ``environ``:
    the environment to read and set (``os.environ``)."""
    env = os.environ if environ is None else environ
    if _CHOSEN and environ is None and env.get(ENV_DIR) == _CHOSEN["dir"]:
        return dict(_CHOSEN)
    if env.get(ENV_DIR) and not _torch_default(env[ENV_DIR]):
        folder, source = env[ENV_DIR], "user"
    else:
        folder, source = os.path.abspath(default_dir(cache_dir)), "yolo_sm"
        env[ENV_DIR] = folder
        if environ is None:
            _forget_folder()
    Path(folder).mkdir(parents=True, exist_ok=True)
    out = {"dir": folder, "dir_source": source, **_switch_caches(env)}
    if environ is None:
        _CHOSEN.clear()
        _CHOSEN.update(out)
    return out


def _torch_default(folder: str) -> bool:
    """Whether ``folder`` is torch's own default cache folder (``/tmp/torchinductor_<user>``).
    Importing ``torch._dynamo`` writes it into ``TORCHINDUCTOR_CACHE_DIR`` (its disk cache of
    packaged graphs asks inductor's ``cache_dir()``, which sets the variable), so by the first
    compile the variable is set in every process that imported it, whether or not the user set
    it: a value naming that folder is taken as torch's, not as the user's choice."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return os.path.abspath(folder) == os.path.abspath(default_cache_dir())


def _forget_folder() -> None:
    """Drop what inductor derived from an earlier ``TORCHINDUCTOR_CACHE_DIR`` in this process
    (its registered caches; torch's own ``temporary_cache_dir`` does the same on a switch)."""
    utils = sys.modules.get("torch._inductor.utils")
    if utils is not None:
        utils.clear_caches()


def _switch_caches(env) -> dict:
    """FX graph and autotune caches on, unless the environment sets them (the user's choice)."""
    import torch._inductor.config as icfg

    if ENV_FX not in env:
        icfg.fx_graph_cache = True
    if ENV_AUTOTUNE not in env:
        icfg.autotune_local_cache = True
    return {
        "fx_graph_cache": bool(icfg.fx_graph_cache),
        "autotune_local_cache": bool(icfg.autotune_local_cache),
    }


def count_files(folder: str | os.PathLike) -> int:
    """Files under ``folder`` (0 when it does not exist)."""
    n = 0
    for _, _, files in os.walk(folder):
        n += len(files)
    return n


def counters() -> tuple[int, int]:
    """Inductor's FX graph cache (hits, misses) so far in this process."""
    from torch._dynamo.utils import counters as c

    return int(c["inductor"].get("fxgraph_cache_hit", 0)), int(
        c["inductor"].get("fxgraph_cache_miss", 0)
    )


def autotuned() -> int:
    """Ops inductor benchmarked its choices for so far in this process: its
    ``select_algorithm_autotune`` counter, which moves only on a miss of the local autotune
    cache (a hit reads the timings from disk and benchmarks nothing)."""
    from torch._dynamo.utils import counters as c

    return int(c["inductor"].get("select_algorithm_autotune", 0))


def autotunes(compile_mode: str | None) -> bool:
    """Whether ``compile_mode`` (with or without a ``+rewrite`` suffix) autotunes its ops:
    the ``max-autotune`` modes."""
    return split_compile_mode(compile_mode or "")[0].startswith("max-autotune")


def tuned_here(delta: int, hits: int, misses: int, tunes: bool = True) -> int | None:
    """The ops a build autotuned itself, from the autotune counter's ``delta`` over a build
    that saw ``hits`` and ``misses`` of the FX graph cache: the delta where no graph was read
    (a read graph replays its compile's counters), 0 where every graph was read (nothing was
    lowered), None where it read some and compiled others (the replayed and the real counts
    cannot be told apart) or the mode does not autotune (``tunes`` False)."""
    if not tunes or (hits and misses):
        return None
    return 0 if hits else int(delta)


def state(
    hits: int,
    misses: int,
    files_before: int,
    files_after: int,
    autotuned_ops: int | None = None,
    autotune_reads: int | None = None,
) -> str:
    """``warm``, ``cold`` or ``partial`` for a build that saw ``hits`` and ``misses`` of the FX
    graph cache and found ``files_before`` files in the cache folder (``files_after`` after
    it); without counted lookups, from the files: none before is cold, none added warm.
    ``autotuned_ops``: for a mode that autotunes, the ops it benchmarked afresh (None
    otherwise); ``autotune_reads``: the ops whose timings it read from the local autotune
    cache instead (:class:`AutotuneReads`; None where not counted). A build whose graphs all
    missed is ``partial`` where it read any op's autotuning from disk, or autotuned nothing in
    a folder that held files (an empty folder holds no autotuning: a model with nothing to
    autotune is cold there)."""
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
    """While active (``with AutotuneReads() as r:``), ``r.n`` counts the lookups of inductor's
    local autotune cache that would have benchmarked an op's choices on a miss but benchmarked
    nothing: ops whose timings were read from disk. Inductor counts the ops it benchmarks
    (``select_algorithm_autotune``) and none that it reads, so this wraps the lookup
    (``torch._inductor.codecache.PersistentCache.lookup``, which ``AlgorithmSelectorCache``
    inherits) for the length of one build and restores it after; an op the build benchmarked
    itself is not counted when it is looked up again. ``r.n`` stays None where torch has no
    such method. One build at a time: compiles run in the main thread."""

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

        tuned = set()  # the (op, inputs) this build benchmarked: a later lookup of one reads
        # what the build itself wrote (a prescreening pass looks an op up twice), not the disk

        def lookup(cache, *args, **kwargs):
            named = dict(zip(("choices", "op", "inputs", "benchmark"), args, strict=False))
            named.update(kwargs)
            key = (named.get("op"), named.get("inputs"), named.get("hint_override"))
            before = autotuned()
            out = orig(cache, *args, **kwargs)
            if autotuned() != before:
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
    """Around a build: ``with Probe(folder, mode) as p: compile...`` then ``p.info()``: the
    cache state, hits, misses, files before and after, the ops autotuned afresh
    (``autotuned_ops``) and those whose autotuning was read from disk (``autotune_reads``);
    both None for a ``compile_mode`` that does not autotune."""

    def __init__(self, folder: str | os.PathLike, compile_mode: str | None = None):
        self.folder = folder
        self.tunes = autotunes(compile_mode)
        self._reads = AutotuneReads() if self.tunes else None

    def __enter__(self):
        self.files_before = count_files(self.folder)
        self.hits0, self.misses0 = counters()
        self.tuned0 = autotuned()
        if self._reads is not None:
            self._reads.__enter__()
        return self

    def __exit__(self, *exc):
        if self._reads is not None:
            self._reads.__exit__(*exc)
        self.files_after = count_files(self.folder)
        hits, misses = counters()
        self.hits, self.misses = hits - self.hits0, misses - self.misses0
        self.tuned = tuned_here(autotuned() - self.tuned0, self.hits, self.misses, self.tunes)
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
