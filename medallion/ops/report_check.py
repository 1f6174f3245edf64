"""Render the HTML report in headless Chromium: its DOM, a screenshot, and any page errors.

``python -m medallion.ops.report_check report.html report.png`` (what ``make report-check`` runs)
exits 0 when the page loaded, every chart is in the DOM and the page logged no error.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rendering:
    """What Chromium made of the page."""

    dom: str
    page_errors: list[str]
    screenshot: Path


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``), if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(binary: str, profile: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, text=True, timeout=timeout, check=False)


def render(page: Path, screenshot: Path, timeout: float = 180.0) -> Rendering:
    """Load ``page`` in headless Chromium; return its DOM, page errors and a screenshot."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed: run `make chromium`")
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="medallion-chromium-") as profile:
        dumped = _chromium(binary, profile, "--dump-dom", url, timeout=timeout)
        if dumped.returncode != 0:
            raise RuntimeError(f"chromium failed ({dumped.returncode}): {dumped.stderr[-2000:]}")
        shot = _chromium(binary, profile, "--window-size=1200,1000", f"--screenshot={screenshot}",
                         url, timeout=timeout)
        if shot.returncode != 0 or not screenshot.is_file():
            raise RuntimeError(f"chromium took no screenshot ({shot.returncode}): {shot.stderr[-2000:]}")
    errors = [line for line in (dumped.stderr + shot.stderr).splitlines()
              if "CONSOLE" in line or "Uncaught" in line or "Failed to load" in line]
    return Rendering(dumped.stdout, errors, screenshot)


def main(argv: Sequence[str] | None = None) -> int:
    """Check ``<report.html> <screenshot.png>``; print what was found."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m medallion.ops.report_check REPORT.html SCREENSHOT.png", file=sys.stderr)
        return 2
    result = render(Path(args[0]), Path(args[1]))
    charts = result.dom.count("<svg")
    print(f"{args[0]}: {charts} charts rendered, {len(result.page_errors)} page errors; "
          f"screenshot {result.screenshot}")
    for line in result.page_errors:
        print(f"  {line}")
    return 0 if charts and not result.page_errors else 1


if __name__ == "__main__":
    sys.exit(main())
