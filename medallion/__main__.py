"""``python -m medallion``: the same as the ``medallion`` command."""

from medallion.cli import entry_point

entry_point()
