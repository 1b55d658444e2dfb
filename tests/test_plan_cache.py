"""The tuned-plan disk cache of the 8-bit engines (collect.engines.plan_cache) and how a cuDNN
graph takes a plan from it (qconv.CudnnQuantConv._from_disk); the cuDNN side runs in the GPU
tests."""

from __future__ import annotations

import json

import pytest
import torch

from yolo_sm.core.engines import plan_cache
from yolo_sm.core.engines.plan_cache import PlanCache
from yolo_sm.core.engines.qconv import CudnnQuantConv, plan_sources

ENV = {"gpu": "NVIDIA H200", "capability": "9.0", "cudnn_backend": 91000, "torch": "2.x"}
KEY = ("INT8", "HALF", True, (8, 64, 40, 40), torch.float16, 128, 3, 3, (1, 1), (1, 1), (1, 1))
KEY += (True, True, torch.device("cuda", 0), False)


def test_a_stored_plan_is_found_by_a_new_cache_of_the_same_environment_only(tmp_path):
    PlanCache(ENV, tmp_path).put(KEY, 3, "eng7_k2", 0.125)
    again = PlanCache(dict(ENV), tmp_path)
    assert again.get(KEY) == (3, "eng7_k2")
    assert again.get(KEY[:-1] + (True,)) is None
    other = PlanCache({**ENV, "cudnn_backend": 91100}, tmp_path)  # another cuDNN: other file
    assert other.path != again.path and other.get(KEY) is None


def test_writes_merge_with_what_another_process_wrote(tmp_path):
    a, b = PlanCache(ENV, tmp_path), PlanCache(ENV, tmp_path)
    a.put(KEY, 1, "p1", 1.0)
    b.put(KEY[:3], 2, "p2", 2.0)
    fresh = PlanCache(ENV, tmp_path)
    assert fresh.get(KEY) == (1, "p1") and fresh.get(KEY[:3]) == (2, "p2")
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]  # no temp file left


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        json.dumps({"version": 0, "env": {}, "plans": {}}),
        json.dumps({"version": plan_cache.VERSION, "env": {"gpu": "other"}, "plans": {}}),
    ],
)
def test_an_unreadable_or_foreign_file_is_empty_and_rewritten(tmp_path, text):
    cache = PlanCache(ENV, tmp_path)
    cache.path.parent.mkdir(parents=True, exist_ok=True)
    cache.path.write_text(text)
    if text.startswith("{not"):
        with pytest.warns(UserWarning, match="unreadable"):
            assert cache.get(KEY) is None
    else:
        assert cache.get(KEY) is None
    cache.put(KEY, 0, "p0", 0.5)
    assert PlanCache(ENV, tmp_path).get(KEY) == (0, "p0")


def test_a_broken_entry_is_a_miss(tmp_path):
    cache = PlanCache(ENV, tmp_path)
    cache.put(KEY, 0, "p0", 0.5)
    data = json.loads(cache.path.read_text())
    data["plans"][plan_cache.signature_text(KEY)] = {"index": "x"}
    cache.path.write_text(json.dumps(data))
    assert cache.get(KEY) is None


def test_a_full_disk_warns_and_keeps_nothing_half_written(tmp_path, monkeypatch):
    import errno

    cache = PlanCache(ENV, tmp_path)
    cache.put(KEY, 0, "p0", 0.5)
    before = cache.path.read_text()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plan_cache.os, "replace", full)
    with pytest.warns(UserWarning, match="not written"):
        cache.put(KEY[:3], 1, "p1", 0.5)
    assert cache.path.read_text() == before  # the old file stands
    assert [p.name for p in cache.path.parent.iterdir()] == [cache.path.name]


def test_the_switch_and_the_folder_follow_the_environment(tmp_path):
    assert plan_cache.enabled({}) and plan_cache.enabled({"YOLO_SM_PLAN_CACHE": "on"})
    for off in ("off", "0", "false", "No"):
        assert not plan_cache.enabled({"YOLO_SM_PLAN_CACHE": off})
    assert plan_cache.folder({"YOLO_SM_CACHE": str(tmp_path)}) == tmp_path / "cudnn_plans"
    assert plan_cache.folder({}).name == "cudnn_plans"


class _Graph:
    """What _from_disk asks of a cuDNN frontend graph: ranked plans with names."""

    def __init__(self, names, broken=()):
        self.names, self.broken, self.built = names, set(broken), []

    def get_execution_plan_count(self):
        return len(self.names)

    def build_plan_at_index(self, i):
        if i in self.broken:
            raise RuntimeError("plan does not build")
        self.built.append(i)

    def get_plan_name_at_index(self, i):
        return self.names[i]


def _conv(graph):
    conv = object.__new__(CudnnQuantConv)  # the graph part alone: no cuDNN here
    conv.graph, conv.plan_index, conv.plan_source = graph, None, "cudnn"
    return conv


@pytest.mark.parametrize(
    "names, broken, stored, taken",
    [
        (["a", "b", "c"], (), (1, "b"), True),
        (["a", "c", "b"], (), (1, "b"), False),  # the ranking changed: tune again
        (["a"], (), (1, "b"), False),  # fewer plans now
        (["a", "b"], (1,), (1, "b"), False),  # it no longer builds
    ],
)
def test_a_graph_takes_the_stored_plan_only_when_it_is_still_the_one_tuned(
    tmp_path, names, broken, stored, taken
):
    cache = PlanCache(ENV, tmp_path)
    cache.put(KEY, *stored, 0.1)
    conv = _conv(_Graph(names, broken))
    assert conv._from_disk(cache, KEY) is taken
    assert (conv.plan_index, conv.plan_source) == ((1, "disk") if taken else (None, "cudnn"))
    assert _conv(_Graph(names))._from_disk(PlanCache(ENV, tmp_path / "empty"), KEY) is False


def test_plan_sources_counts_each_graph_of_a_model_by_where_its_plan_came_from():
    def graph(source):
        conv = _conv(None)
        conv.plan_source = source
        return conv

    a, b = torch.nn.Module(), torch.nn.Module()
    a._plans = {(1,): graph("tuned"), (2,): graph("disk"), (3,): None}  # None: declined
    b._plans = {(1,): graph("disk")}
    model = torch.nn.Sequential(a, b)
    assert plan_sources(model) == {"tuned": 1, "disk": 2}
    assert plan_sources(torch.nn.Sequential(torch.nn.ReLU())) == {}
