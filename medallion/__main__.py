"""``python -m medallion``: the same as the ``medallion`` command."""

from medallion.cli.main import entry_point

entry_point()
