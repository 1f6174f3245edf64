"""Run a ``medallion`` command in a process of its own and tell whether it touched Spark.

The read-only commands (status, show, quality, report) must answer without a JVM: the process
runs with ``JAVA_HOME`` pointing nowhere (a Spark start would fail), and reports, after the
command, which PySpark, py4j or delta-spark modules it imported and which child processes it had.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MARKER = "SPARK-FREE-CHECK "
REPO = Path(__file__).resolve().parent.parent

_SCRIPT = f"""
import json, os, sys
from medallion.cli.main import main
status = main(sys.argv[1:])
spark = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'delta'))
children = []
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        with open(f'/proc/{{pid}}/stat') as stat:
            parent = int(stat.read().rsplit(')', 1)[1].split()[1])
        if parent == os.getpid():
            with open(f'/proc/{{pid}}/cmdline') as cmdline:
                children.append(cmdline.read().replace('\\0', ' ').strip())
    except (OSError, ValueError, IndexError):
        pass
print({MARKER!r} + json.dumps({{'spark_modules': spark, 'children': children}}), file=sys.stderr)
sys.exit(status)
"""


@dataclass(frozen=True)
class Ran:
    """What the command printed, its exit status, and the Spark it touched."""

    returncode: int
    stdout: str
    stderr: str
    spark_modules: list[str]
    children: list[str]


def run_without_spark(args: list[str], cwd: Path, timeout: float = 300) -> Ran:
    """``medallion ARGS`` in a new process whose JVM could not start; what it did."""
    # This checkout's medallion, whatever the virtualenv's editable install points at.
    python_path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "JAVA_HOME": str(cwd / "no-java-here"),
           "PYTHONPATH": os.pathsep.join(python_path)}
    env.pop("SPARK_HOME", None)
    done = subprocess.run([sys.executable, "-c", _SCRIPT, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = done.stderr.splitlines()
    checks = [json.loads(line[len(MARKER):]) for line in lines if line.startswith(MARKER)]
    assert checks, f"the command did not return:\n{done.stderr[-3000:]}"
    stderr = "\n".join(line for line in lines if not line.startswith(MARKER))
    return Ran(done.returncode, done.stdout, stderr, checks[0]["spark_modules"],
               checks[0]["children"])
