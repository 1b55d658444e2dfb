"""``yolo-sm`` command line: thin sub-commands over the package's functions.

Each command group is one module with ``add_parser(sub)`` and ``run(args)``: :mod:`env` (env,
models), :mod:`measure` (sweep, bench, remeasure), :mod:`profile` (trace, ncu, gpm, profile,
occupancy) and :mod:`data` (collect, render, claims). They import the collect and report layers
inside their commands, so ``--help``, ``render`` and ``claims`` load no torch.

Errors a user can cause end in one sentence on stderr and exit code 2, with no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

import yolo_sm
from yolo_sm.cli import data, env, measure, profile
from yolo_sm.cli.common import Parser
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.scrub import RECORD_HOST_ENV

DESCRIPTION = (
    "How object detectors use a GPU's streaming multiprocessors: measure, profile, collect "
    "datasets, render the notebooks, decide the claims."
)
#: the command groups, in the order ``yolo-sm --help`` lists their commands
GROUPS = (env, measure, profile, data)


def build_parser() -> argparse.ArgumentParser:
    """The ``yolo-sm`` parser: every group's sub-commands, each setting ``run``."""
    p = Parser(prog="yolo-sm", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"yolo-sm {yolo_sm.__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=Parser)
    for group in GROUPS:
        group.add_parser(sub)
    for name in RECORDING:  # the commands that write provenance
        sub.choices[name].add_argument(
            "--record-host", action="store_true", help="record this host's name in provenance"
        )
    return p


#: commands whose tables carry provenance (``--record-host`` adds the host name to it)
RECORDING = ("sweep", "bench", "remeasure", "trace", "ncu", "gpm", "profile", "collect")


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "record_host", False):
            os.environ[RECORD_HOST_ENV] = "1"  # child processes (ncu's target) see it too
        return args.run(args)
    except UserError as e:
        print(f"yolo-sm: error: {sentence(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("yolo-sm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


def sentence(e: Exception) -> str:
    """An error's text on one line, ending in a full stop."""
    text = " ".join(str(e).split())
    return text if text.endswith((".", ")", "'")) else text + "."


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
