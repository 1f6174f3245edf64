"""spark-submit entry point of the silver job.

``spark-submit ... jobs/silver.py [--env prod] [--trigger once]``:

Takes the same options as `medallion run silver`; exits 0 when everything available was processed,
1 when a table failed (the message names it), 2 on bad configuration.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from medallion.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the silver layer with the command-line options in ``argv``."""
    return cli_main(["run", "silver", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
