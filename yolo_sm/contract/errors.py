"""Errors a user can cause: the CLI prints their message as one sentence and exits 2."""

import functools
import importlib


class UserError(ValueError):
    """Bad input (config, flag, file, missing tool): the message says what to do."""


class NotAvailableError(UserError, ImportError):
    """An optional backend or tool (TensorRT, ncu, pynvml, a CUDA GPU) is not available here."""


def need(module: str, advice: str):
    """The module ``module``, or NotAvailableError ``advice`` (what needs it, how to install it)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise NotAvailableError(advice) from None


#: what a loader raises on input missing a field or holding one of the wrong type
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError)


def refuse_malformed(what: str, why: str):
    """Decorate a loader of ``path``: malformed input ends in one UserError naming it."""

    def wrap(loader):
        @functools.wraps(loader)
        def wrapped(path, *args, **kwargs):
            try:
                return loader(path, *args, **kwargs)
            except UserError:
                raise
            except MALFORMED as e:
                msg = f"{path} is not {what} this package reads: {why} ({type(e).__name__})"
                raise UserError(msg) from None

        return wrapped

    return wrap
