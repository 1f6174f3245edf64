"""The one error a pipeline definition raises: it names the key path and the file."""

from __future__ import annotations

from medallion.errors import ConfigError


class PipelineError(ConfigError):
    """A pipeline definition is invalid.

    A :class:`~medallion.config.ConfigError`, so that a command that already turns configuration
    errors into exit status 2 (and a message naming key and file) handles this one too.
    """

    def __init__(self, key: str, source: str, problem: str) -> None:
        super().__init__(key, source, problem)
        # ConfigError's message says "configuration": say what was being read instead.
        self.args = (f"invalid pipeline definition: {key} (from {source}): {problem}",)
        self.problem = problem
