"""Where a task runs: the Dask cluster (local or a scheduler's; each worker offers ``GPU=1`` and
each task asks for it), the worker's place and its threads pinned to its cores."""

from __future__ import annotations

import contextlib
import logging
import os
import socket

from yolo_sm.contract.errors import UserError, need
from yolo_sm.core.devices import cuda_index, identify, visible_index

CPUS_ENV = "YOLO_SM_CPUS"  # comma list of the cores a local worker's threads are pinned to
RESOURCE = "GPU"


def require_distributed():
    """The ``distributed`` module, or one sentence saying how to install it."""
    advice = (
        "collect --workers and --scheduler need Dask: install the distributed extra "
        "(pip install 'yolo_sm[distributed]') or run collect without them"
    )
    need("dask", advice)
    return need("distributed", advice)


def split_cores(n: int, cores: list[int]) -> list[list[int]]:
    """``cores`` cut into ``n`` contiguous, equal shares (cores repeat only where too few)."""
    if len(cores) < n:
        return [[cores[i % len(cores)]] for i in range(n)]
    k = len(cores) // n
    return [cores[i * k : (i + 1) * k] for i in range(n)]


def usable_cores() -> list[int]:
    """The cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))  # pragma: no cover - not Linux


def pin_threads() -> list[int]:
    """Pin this process's threads to :data:`CPUS_ENV`'s cores (else those it may use) and set
    torch's threads to their number; returns the cores."""
    import torch

    spec = os.environ.get(CPUS_ENV)
    if spec and hasattr(os, "sched_setaffinity"):
        cores = [int(c) for c in spec.split(",")]
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(tid), cores)
    else:
        cores = usable_cores()
    torch.set_num_threads(len(cores))
    return cores


def place(device: str) -> dict:
    """Where this process measures: ``gpu_uuid``, ``gpu_index`` (nvidia-smi's numbering; empty
    on a CPU), ``host`` and ``worker`` (the Dask worker's name, '' outside one)."""
    try:
        from distributed import get_worker

        w = get_worker()
        worker = str(w.name if w.name is not None else w.address)
    except (ImportError, ValueError):
        worker = ""
    out = {"gpu_uuid": None, "gpu_index": None, "host": socket.gethostname(), "worker": worker}
    if str(device).startswith("cuda"):
        ident = identify(device)
        if ident["nvml_match"] is not None:  # None: no CUDA device here
            out["gpu_uuid"] = ident["gpu_uuid"]
            found = ident["nvml_index"]
            out["gpu_index"] = visible_index(cuda_index(device)) if found is None else found
    return out


def local_cluster(n: int, device: str):
    """A local cluster of ``n`` workers, one thread, ``GPU=1``, an equal share of the cores and
    (on a GPU) one visible GPU each (``LocalCUDACluster`` where dask-cuda is installed); no
    memory limit (a model's build may take a worker's share of RAM) and no dashboard."""
    distributed = require_distributed()
    import dask

    # workers that may start processes of their own (torch.compile's compile workers)
    dask.config.set({"distributed.worker.daemon": False})
    shares = split_cores(n, usable_cores())
    common = {"nthreads": 1, "memory_limit": 0, "resources": {RESOURCE: 1}}
    gpus: list[str] = []
    if str(device).startswith("cuda"):
        import torch

        env = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
        gpus = [v for v in env if v] or [str(i) for i in range(torch.cuda.device_count())]
        gpus = gpus[: torch.cuda.device_count()]
        if n > len(gpus):
            raise UserError(
                f"--workers {n} asks for more workers than the {len(gpus)} GPU(s) visible here "
                "(one GPU per worker)"
            )
        with contextlib.suppress(ImportError):
            from dask_cuda import LocalCUDACluster

            return LocalCUDACluster(
                n_workers=n,
                threads_per_worker=1,
                CUDA_VISIBLE_DEVICES=",".join(gpus[:n]),
                memory_limit=0,
                resources={RESOURCE: 1},
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            )
    workers = {}
    for i in range(n):
        env = {CPUS_ENV: ",".join(map(str, shares[i])), "OMP_NUM_THREADS": str(len(shares[i]))}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[i]
        workers[f"w{i}"] = {
            "cls": distributed.Nanny,
            "options": {**common, "env": env, "silence_logs": logging.ERROR},
        }
    scheduler = {
        "cls": distributed.Scheduler,
        "options": {"dashboard": False, "dashboard_address": ":0"},  # no fixed port
    }
    return distributed.SpecCluster(
        workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="yolo-sm"
    )


@contextlib.contextmanager
def client_for(workers: int | None, scheduler: str | None, device: str):
    """A Dask client on a new local cluster of ``workers``, or on ``scheduler``'s."""
    distributed = require_distributed()
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="30s")
        except OSError as e:
            raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        with client:
            members = client.scheduler_info()["workers"].values()
            if not any(w.get("resources", {}).get(RESOURCE, 0) for w in members):
                raise UserError(
                    f"no worker of the scheduler at {scheduler} offers the {RESOURCE} "
                    f"resource: start them with dask worker --nthreads 1 --resources "
                    f"{RESOURCE}=1"
                )
            yield client
        return
    n = 1 if workers is None else int(workers)
    with local_cluster(n, device) as cluster, distributed.Client(cluster) as c:
        yield c
