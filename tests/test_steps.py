"""Step kinds are declared once (a topic's ``steps`` or the generic table), each by a frozen spec
whose fields carry their checks: the plan loader, the runners and the CLI read the same spec."""

import dataclasses

import pytest

from yolo_sm.cli.main import build_parser
from yolo_sm.contract import plans
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.steps import GENERIC, BenchStep, SweepStep
from yolo_sm.contract.values import Spec
from yolo_sm.topics import ALL, STEPS


def test_every_kind_is_declared_once_and_the_plan_kinds_are_derived():
    declared = list(GENERIC) + [k for t in ALL for k in t.steps]
    assert len(declared) == len(set(declared)) and set(plans.KINDS) == set(declared)


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_each_spec_is_frozen_and_every_param_is_checked(kind):
    spec, runner = STEPS[kind]
    assert issubclass(spec, Spec) and spec.kind == kind
    assert dataclasses.is_dataclass(spec) and spec.__dataclass_params__.frozen
    assert spec.params() and all(callable(f.metadata["check"]) for f in spec.params().values())
    assert runner.startswith("yolo_sm.") and ":" in runner
    default = spec.from_mapping({})  # the defaults pass the spec's own checks
    with pytest.raises(dataclasses.FrozenInstanceError):
        default.kind_of_change = 1
    with pytest.raises(UserError, match=f"unknown {kind} parameter"):
        spec.from_mapping({"no_such_key": 1})


def test_the_runners_are_the_declared_ones():
    from yolo_sm.core.plan_runners import RUNNERS
    from yolo_sm.topics import load

    assert set(RUNNERS) == set(STEPS)
    assert all(RUNNERS[k] is load(ref) for k, (_, ref) in STEPS.items())


def _options(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices)
    return {o for a in sub.choices[command]._actions for o in a.option_strings}


@pytest.mark.parametrize(
    "command, spec, left_out",
    [
        ("sweep", SweepStep, {"model", "models", "check"}),  # --model (common), --check on/off
        ("bench", BenchStep, {"model", "family", "widths", "input_shape", "imgsz", "budget_ms",
                              "warmup_ms", "est_unit_s", "predict"}),
    ],
)  # fmt: skip
def test_the_cli_flags_are_built_from_the_spec(command, spec, left_out):
    flags = {f.metadata["flag"] or "--" + n.replace("_", "-") for n, f in spec.params().items()}
    flags -= {"--" + n.replace("_", "-") for n in left_out}
    assert flags <= _options(command) and "--model" in _options(command)


def test_a_plan_and_a_flag_fail_in_the_same_check(tmp_path):
    """One value parser: the same bad budget is refused by the plan loader and by the flags,
    each naming where it came from."""
    p = tmp_path / "plan.yaml"
    p.write_text("steps: [{name: s, kind: sweep, out: s.parquet, params: {budget_ms: -1}}]\n")
    with pytest.raises(UserError, match=r"step s budget_ms must be above 0"):
        plans.load_plan(p)
    with pytest.raises(UserError, match=r"^--budget-ms must be above 0"):
        SweepStep.from_mapping({"budget_ms": "-1"}, flags=True)
    assert SweepStep.from_mapping({"budget_ms": "20"}).budget_ms == 20.0
