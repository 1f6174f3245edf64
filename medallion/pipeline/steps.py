"""Python steps a declaration names as ``module:function``: found by import, never called here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class StepNotFound(ValueError):
    """A ``module:function`` step that cannot be had; the message says why."""


def find_step(step: str) -> Callable[..., Any]:
    """The callable that ``module:function`` names (a ``DataFrame -> DataFrame`` function)."""
    module_name, _, function = step.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the import is the definition's problem to report
        raise StepNotFound(f"cannot import {module_name!r} of {step}: "
                           f"{type(exc).__name__}: {exc}") from None
    target = getattr(module, function, None)
    if target is None:
        raise StepNotFound(f"module {module_name!r} has no {function!r} ({step})")
    if not callable(target):
        raise StepNotFound(f"{step} is not callable (a DataFrame -> DataFrame function)")
    return target
