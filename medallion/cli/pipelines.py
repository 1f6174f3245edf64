"""``medallion pipelines``: load, check and print every pipeline's graph, without Spark (a dry run)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from medallion.config.load import default_conf_dir
from medallion.config.model import DEFAULT_ENV, ENV_VAR_ENV
from medallion.pipeline.errors import PipelineError
from medallion.pipeline.render import render_graph
from medallion.pipeline.validate import check_pipelines

EXIT_OK = 0
EXIT_INVALID = 2  # as for an invalid configuration: nothing was started


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medallion pipelines",
        description="Check the pipelines of conf/pipelines and print their graphs; Spark is not started.")
    parser.add_argument("names", nargs="*", help="pipelines to print (default: all)")
    parser.add_argument("--env", default=None,
                        help=f"environment whose overlays apply (default ${ENV_VAR_ENV} or {DEFAULT_ENV})")
    parser.add_argument("--conf-dir", type=Path, default=None, help="configuration folder (default conf/)")
    return parser


def _check_environment(conf_dir: Path, env: str) -> None:
    """Refuse an environment that nothing in the folder names (``<env>.yaml`` or a pipeline's
    ``<name>.<env>.yaml``): a typo would otherwise check the pipelines with no overlay, and say
    they are valid for an environment that does not exist, as ``medallion run`` refuses it."""
    known = {p.stem for p in conf_dir.glob("*.yaml") if p.stem != "base"}
    known |= {p.stem.partition(".")[2] for p in (conf_dir / "pipelines").glob("*.*.yaml")}
    if env not in known:
        raise PipelineError("env", str(conf_dir / f"{env}.yaml"),
                            f"no overlay for environment {env!r} (available: {', '.join(sorted(known))})")


def main(argv: Sequence[str] | None = None) -> int:
    """Load, validate and print; exit 0, or 2 with the error (key path and file) on stderr."""
    args = _parser().parse_args(argv)
    conf_dir = args.conf_dir or default_conf_dir()
    given = args.env or os.environ.get(ENV_VAR_ENV)
    env = given or DEFAULT_ENV
    try:
        if given:
            _check_environment(conf_dir, env)
        checked = check_pipelines(conf_dir, env)  # every pipeline, even those not printed
        known = [c.spec.name for c in checked]
        for name in args.names:
            if name not in known:
                raise PipelineError(name, str(conf_dir / "pipelines"),
                                    f"no such pipeline (pipelines: {', '.join(known)})")
    except PipelineError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    for pipeline in checked:
        if not args.names or pipeline.spec.name in args.names:
            print(render_graph(pipeline.spec, pipeline.graph, pipeline.tables))
            print()
    print(f"{len(checked)} pipeline(s) valid (env {env}, {conf_dir / 'pipelines'})")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
