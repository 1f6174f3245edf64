"""spark-submit entry point of the maintenance: OPTIMIZE (Z-ORDER from configuration), VACUUM,
old state versions deleted.

``spark-submit ... jobs/maintain.py [--env prod]``:

Takes the same options as `medallion maintain`; holds every layer's lock of the lakehouse, as
`medallion run all` does, so it never writes beside a run; exits 0 when done, 2 on bad
configuration, 3 when a run holds the lakehouse longer than ``--wait``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from medallion.cli.main import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """Maintain every table, with the command-line options in ``argv``."""
    return cli_main(["maintain", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
