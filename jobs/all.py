"""spark-submit entry point of the whole pipeline: bronze, then silver, then gold.

``spark-submit ... jobs/all.py [--env prod] [--trigger once]``:

Takes the same options as `medallion run all`; exits 0 when everything available was processed,
1 when a table failed (the message names it), 2 on bad configuration.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from medallion.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run every layer, bronze to gold, with the command-line options in ``argv``."""
    return cli_main(["run", "all", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
