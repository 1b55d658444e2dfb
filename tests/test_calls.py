"""The package's calls of its own functions and classes name parameters those have.

Much of the package runs only on a GPU (engines, ceilings, profilers), where CPU CI never calls
it, and so do the GPU tests: a keyword a refactor removed from a callee
(``GraphFormat(seconds=...)`` once) or a renamed function then breaks only on the GPU. Every
module is imported and each call whose callee resolves to a yolo_sm function or class (a
module-level name, or ``module.name`` of a yolo_sm module) is checked: its keywords must be
parameters of the callee (one taking ``**kwargs`` accepts any), its arguments, where none is
unpacked, must bind to the signature, and ``module.name`` must exist."""

import ast
import importlib
import inspect
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "yolo_sm"


def _module_name(path: Path, pkg: Path) -> str:
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _names(mod, tree) -> dict:
    """The module's globals, plus what its function-level ``from yolo_sm... import`` bind."""
    names = dict(vars(mod))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("yolo_sm"):
            src = importlib.import_module(node.module)
            for a in node.names:
                obj = getattr(src, a.name, None)
                if obj is None:
                    obj = importlib.import_module(f"{node.module}.{a.name}")
                names.setdefault(a.asname or a.name, obj)
    return names


def _callee(node: ast.Call, names: dict, problems: list, where: str):
    fn = node.func
    if isinstance(fn, ast.Name):
        return names.get(fn.id)
    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name):
        base = names.get(fn.value.id)
        if inspect.ismodule(base) and base.__name__.startswith("yolo_sm"):
            if not hasattr(base, fn.attr):
                problems.append(f"{where}: {base.__name__} has no {fn.attr}")
            return getattr(base, fn.attr, None)
    return None


def _problems(path: Path, pkg: Path = PKG) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = _names(importlib.import_module(_module_name(path, pkg)), tree)
    problems: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        where = f"{path.relative_to(pkg.parent)}:{node.lineno}"
        obj = _callee(node, names, problems, where)
        if not callable(obj) or not str(getattr(obj, "__module__", "")).startswith("yolo_sm"):
            continue
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):  # a builtin-backed callable: nothing to read
            continue
        unknown = [k.arg for k in node.keywords if k.arg and k.arg not in params]
        if unknown and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            problems.append(f"{where}: {obj.__qualname__} has no parameter {unknown}")
        elif not any(isinstance(a, ast.Starred) for a in node.args) and all(
            k.arg for k in node.keywords
        ):  # every argument spelt out: they must bind (count, required ones)
            try:
                inspect.signature(obj).bind(*node.args, **{k.arg: k for k in node.keywords})
            except TypeError as e:
                problems.append(f"{where}: {obj.__qualname__}: {e}")
    return problems


def test_the_packages_calls_name_parameters_their_callees_have():
    paths = [p for p in sorted(PKG.rglob("*.py")) if p.name != "__main__.py"]
    problems = [msg for p in paths for msg in _problems(p)]
    tests = Path(__file__).parent  # the GPU tests too: CPU CI skips them
    problems += [msg for p in sorted(tests.glob("test_gpu_*.py")) for msg in _problems(p, tests)]
    assert not problems, "\n".join(problems)


def test_a_stale_keyword_and_a_missing_name_are_found(tmp_path, monkeypatch):
    """The check itself, on a package of two modules (its name starts with yolo_sm)."""
    pkg = tmp_path / "yolo_sm_probe_calls"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lib.py").write_text("def f(a, b=1):\n    return a + b\n")
    (pkg / "use.py").write_text(
        "from yolo_sm_probe_calls import lib\n\n\ndef g():\n"
        "    return lib.f(1, b=2) + lib.f(1, c=2) + lib.h() + lib.f()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert sorted(_problems(pkg / "use.py", pkg)) == [
        "yolo_sm_probe_calls/use.py:5: f has no parameter ['c']",
        "yolo_sm_probe_calls/use.py:5: f: missing a required argument: 'a'",
        "yolo_sm_probe_calls/use.py:5: yolo_sm_probe_calls.lib has no h",
    ]
