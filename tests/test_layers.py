"""The package's layers import one way, without cycles, private names or torch where it has no
place.

Layers, lowest first: ``contract`` (pandas / pyarrow), ``analyse`` (DataFrame -> DataFrame),
``core`` (torch, GPU), ``report`` (plotly, ipywidgets), ``topics`` and ``cli`` on top. A topic
folder's ``__init__`` is pure data (its Topic record and its step kinds' frozen specs, checked
by ``contract.values``; the plan loader in ``contract`` reads the kinds from the registry); its
``collect*`` modules are collect code (torch allowed, the core below them); its other modules
(analysis, rules, report) import neither torch nor any collect code, so ``make report`` runs
without torch. Every internal import sits at module level (a reader sees what depends on what),
but the CLI's imports of core, topics and report, which load on use so that `yolo-sm render`
runs without torch.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "yolo_sm"
ALLOWED = {
    "contract": {"contract", "registry"},
    "analyse": {"contract", "analyse"},
    "core": {"contract", "analyse", "core", "registry", "topic_collect"},
    "report": {"contract", "analyse", "report", "registry"},
    "registry": {"contract", "registry"},
    "topic": {"contract", "analyse", "report", "registry", "topic"},
    "topic_collect": {"contract", "analyse", "core", "registry", "topic", "topic_collect"},
    "cli": {"contract", "analyse", "core", "report", "registry", "topic", "topic_collect", "cli"},
}
HEAVY = ("torch", "torchvision", "ultralytics", "tensorrt", "onnxruntime", "onnx", "triton")
TORCH_FREE = ("contract", "analyse", "report", "registry", "topic")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(module imported, names, at module level?) for every import of ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), id(node) in top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, tuple(a.name for a in node.names), id(node) in top


MODULES = {_module(p): p for p in sorted(PKG.rglob("*.py"))}


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    if len(parts) > 1 and parts[1] == "topics":
        if len(parts) <= 3:  # yolo_sm.topics and each topic's __init__: the registry, pure data
            return "registry"
        return "topic_collect" if parts[3].startswith("collect") else "topic"
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_every_module_belongs_to_a_layer():
    loose = [m for m in MODULES if _layer(m) is None and m not in ("yolo_sm", "yolo_sm.__main__")]
    assert not loose, f"modules outside the layers: {loose}"


@pytest.mark.parametrize("mod", sorted(m for m in MODULES if _layer(m)))
def test_imports_run_one_way(mod):
    layer = _layer(mod)
    bad = []
    for target, names, top in _imports(MODULES[mod]):
        root = target.split(".")[0]
        if target.startswith("yolo_sm."):
            tl = _layer(target)
            if tl is not None and tl not in ALLOWED[layer]:
                bad.append(f"imports {target} ({tl} is not below {layer})")
            on_use = ("core", "report", "registry", "topic", "topic_collect")
            if not top and not (layer == "cli" and tl in on_use):
                # the CLI alone imports its command's layer on use: `yolo-sm render` and
                # `yolo-sm claims` run where torch is not installed
                bad.append(f"imports {target} inside a function (internal imports at module level)")
            private = [n for n in names if n.startswith("_")]
            if private:
                bad.append(f"imports private {private} from {target}")
        elif root in HEAVY and layer in TORCH_FREE:
            bad.append(f"imports {target} (the {layer} layer runs without torch)")
    assert not bad, f"{mod}: " + "; ".join(bad)


def test_no_import_cycles():
    graph = {m: set() for m in MODULES}
    for m, p in MODULES.items():
        for target, names, top in _imports(p):
            if not top or not target.startswith("yolo_sm"):
                continue
            for cand in [target] + [f"{target}.{n}" for n in names]:
                if cand in graph and cand != m:
                    graph[m].add(cand)
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    # a package __init__ re-exporting its own submodules is not a cycle of meaning
    cycles = [c for c in cycles if not all(x.startswith(c[0]) for x in c)]
    assert not cycles, f"import cycles: {cycles}"


def test_the_torch_free_layers_import_without_torch():
    """Importing every contract / analyse / report module loads no heavy package."""
    mods = [m for m in MODULES if _layer(m) in TORCH_FREE]
    code = (
        "import sys\n"
        f"for m in {mods!r}:\n"
        "    __import__(m)\n"
        f"print(sorted(k for k in sys.modules if k.split('.')[0] in {HEAVY!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
