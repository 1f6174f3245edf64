"""The ``medallion`` command: parse, load, call, exit with a status."""
