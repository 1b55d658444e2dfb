"""Errors a user can cause: the CLI prints their message as one sentence and exits 2."""


class UserError(ValueError):
    """Bad input (config, flag, file, missing tool): the message says what to do."""


class NotAvailableError(UserError, ImportError):
    """An optional backend or tool (TensorRT, ncu, pynvml, a CUDA GPU) is not available here."""
