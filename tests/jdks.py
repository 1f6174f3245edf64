"""The JDKs installed on this machine in the usual places, for the tests that run a JVM on each
supported release."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path

# Spark 4.2 runs on Java 17, 21 and 25.
SUPPORTED = range(17, 26)
# Where JDKs are installed: Debian and Ubuntu packages and Temurin's, RPM distributions, macOS,
# SDKMAN! and IntelliJ's downloads.
PLACES = ("/usr/lib/jvm/*", "/usr/java/*", "/opt/java/*",
          "/Library/Java/JavaVirtualMachines/*/Contents/Home",
          "~/.sdkman/candidates/java/*", "~/.jdks/*")


def release_of(home: Path) -> int | None:
    """The feature release (17, 25) of the JDK at ``home``, from its ``release`` file."""
    try:
        text = (home / "release").read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.MULTILINE)
    return int(found[1]) if found else None


def installed(places: Iterable[str] = PLACES) -> list[tuple[int, Path]]:
    """``(release, home)`` of every JDK with a ``bin/java`` under ``places`` (each home once,
    however many links lead to it), newest release first."""
    found: dict[Path, int] = {}
    for place in places:
        for entry in sorted(glob.glob(os.path.expanduser(place))):
            home = Path(entry).resolve()
            release = release_of(home)
            if release is not None and os.access(home / "bin" / "java", os.X_OK):
                found.setdefault(home, release)
    return sorted(((release, home) for home, release in found.items()),
                  key=lambda pair: (-pair[0], str(pair[1])))
