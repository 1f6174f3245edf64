"""spark-submit entry point of the gold job.

``spark-submit ... jobs/gold.py [--env prod] [--trigger once]``:

Takes the same options as `medallion run gold`; exits 0 when everything available was processed,
1 when a table failed (the message names it), 2 on bad configuration.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from medallion.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the gold layer with the command-line options in ``argv``."""
    return cli_main(["run", "gold", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
