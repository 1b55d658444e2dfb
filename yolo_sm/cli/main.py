"""``yolo-sm``: one module per command group (``add_parser(sub)``). :func:`main` is where errors
end: a user's is one sentence on stderr, exit 2; Ctrl-C 130, SIGTERM 143 (tables written kept)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
import threading

import yolo_sm
from yolo_sm.cli import check, data, env, measure, monitor, profile
from yolo_sm.cli.common import Parser, log
from yolo_sm.contract import values
from yolo_sm.contract.errors import UserError
from yolo_sm.contract.scrub import RECORD_HOST_ENV
from yolo_sm.contract.values import os_error_sentence

DESCRIPTION = (
    "How object detectors use a GPU's streaming multiprocessors: measure, profile, collect "
    "datasets, render the notebooks, decide the claims."
)
#: the command groups, in the order ``yolo-sm --help`` lists their commands
GROUPS = (env, measure, check, profile, monitor, data)
#: exit codes: a user error, an interrupt (Ctrl-C), a SIGTERM
USER_ERROR, INTERRUPTED, TERMINATED = 2, 130, 143
#: the optional packages commands import (top-level module -> the pyproject extra installing it)
OPTIONAL_MODULES = {
    module: extra
    for extra, modules in {
        "collect": "torch torchvision ultralytics tqdm",
        "onnx": "onnx onnxruntime onnxscript",
        "gpu": "pynvml nvtx",
        "ncu": "ncu_report",
        "distributed": "dask distributed",
        "monitor": "prometheus_client",
        "report": "plotly ipywidgets ipykernel nbclient nbconvert nbformat",
    }.items()
    for module in modules.split()
}


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised where the main thread next runs Python: it unwinds like Ctrl-C."""


def _on_sigterm(signum, frame):
    raise Terminated()


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
    for command in sub.choices.values():
        g = command.add_argument_group("output")
        quiet = "no progress bars or notes: warnings and errors"
        g.add_argument("-q", "--quiet", action="store_true", help=quiet)
        g.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr too")
    return p


#: commands whose tables carry provenance (``--record-host`` adds the host name to it)
RECORDING = ("sweep", "bench", "remeasure", "trace", "ncu", "gpm", "profile", "collect", "monitor")


#: commands that build models or engines (a cache folder and ultralytics' config folder)
CACHING = ("models", "sweep", "bench", "remeasure", "trace", "ncu", "gpm", "profile", "collect")


def main(argv: list[str] | None = None) -> int:
    """Run one ``yolo-sm`` command; returns its exit code."""
    handler = previous = args = None
    if threading.current_thread() is threading.main_thread():  # signals reach it only
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as e:  # --help, --version
            return e.code if isinstance(e.code, int) else 0
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("yolo-sm: %(message)s"))
        log.setLevel(
            logging.WARNING if args.quiet else logging.DEBUG if args.verbose else logging.INFO
        )
        log.addHandler(handler)
        log.propagate = False
        log.debug("%s", " ".join(f"{k}={v}" for k, v in vars(args).items() if k != "run"))
        values.environment(caching=args.cmd in CACHING)
        if getattr(args, "record_host", False):
            os.environ[RECORD_HOST_ENV] = "1"  # child processes (ncu's target) see it too
        return args.run(args)
    except UserError as e:
        return _fail(sentence(e))
    except ModuleNotFoundError as e:
        text = missing_package(e, getattr(args, "cmd", None))
        if text is None:
            raise
        return _fail(text)
    except Terminated:
        print("yolo-sm: stopped by SIGTERM; what was written so far is kept", file=sys.stderr)
        return TERMINATED
    except KeyboardInterrupt:
        print("yolo-sm: interrupted; what was written so far is kept", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0
    except OSError as e:
        return _fail(sentence(os_error_sentence(e)))
    finally:
        if handler is not None:
            log.removeHandler(handler)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def missing_package(e: ModuleNotFoundError, command: str | None) -> str | None:
    """The sentence for ``command`` lacking an optional package; None for any other error."""
    top = (e.name or "").partition(".")[0]
    extra = OPTIONAL_MODULES.get(top)
    if extra is None or importlib.util.find_spec(top) is not None:
        return None
    return (
        f"{command or 'this command'} needs {top}, which is not installed in this Python "
        f"environment; install the {extra} extra (pip install -e '.[{extra}]' in the "
        f"repository; make setup installs every extra)."
    )


def _fail(text: str) -> int:
    print(f"yolo-sm: error: {text}", file=sys.stderr)
    return USER_ERROR


def sentence(e) -> str:
    """An error's text on one line, ending in a full stop."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if text.endswith((".", ")", "'")) else text + "."


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
