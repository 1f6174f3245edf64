"""Python steps the pipeline fixtures name (``module:function``): imported, never called, by unit tests."""

from __future__ import annotations

from typing import Any

NOT_CALLABLE = 42


def passthrough(frame: Any) -> Any:
    """A DataFrame -> DataFrame step that changes nothing."""
    return frame
