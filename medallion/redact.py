"""Recognising secrets, and the one redaction function for commands, log lines and errors.

A secret-like setting is one whose name says it holds a secret (``*secret*``, ``*password*``,
``*token*``, ``*credential*``, access or private keys, ``sasl.jaas.config``...). Its value never
belongs in configuration, and whatever is printed or logged goes through :func:`redact_text`
(free text), :func:`redact_argv` (an argument vector) or :func:`redact_command` (a shell line).

A leaf module: it imports nothing of medallion, so configuration loading can use it.

``python -m medallion.redact`` copies standard input to standard output, redacted: the
scheduling script pipes the command line it logs through it.
"""

from __future__ import annotations

import logging
import re
import shlex
import sys
import traceback
from collections.abc import Sequence
from typing import Any

REDACTED = "***"

# Spark's own spark.redaction.regex is (?i)secret|password|token|access[.]?key; this adds the
# other names secrets go by in Hadoop, Kafka, JDBC and AWS settings.
_SECRET_NAME = re.compile(
    r"(?i)(secret|passw(or)?d|token|credential|access[._-]?key|private[._-]?key|api[._-]?key"
    r"|jaas|encryption[._-]?key|signature)")
# Names that match the words above but hold a class name, a switch or a file path, not a secret
# (fs.s3a.aws.credentials.provider, hadoop.security.credential.provider.path, ...).
_NOT_SECRET = re.compile(r"(?i)[._](providers?(\.path)?|enabled|binding)$")

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s@'\"]+@")
_BARE_USERINFO = re.compile(r"(?<![\w/.\-@:])[^\s/@:,'\"=]+:[^\s/@,'\"]+@(?=[\w\[])")
_SECRET_PARAMETER = re.compile(
    r"(?i)([?&;]\s*(?:password|passwd|pwd|secret|token|access[_-]?key|secret[_-]?key"
    r"|signature|sig)\s*=)[^&;\s'\"]*")
_ASSIGNMENT = re.compile(
    r"(?P<key>[A-Za-z_][\w.\-]*)(?P<quote>[\"']?)(?P<sep>\s*[=:]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&'\"}\]]+)")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def is_secret_key(name: str) -> bool:
    """Whether a setting (or variable, or flag) of this name holds a secret."""
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.search(name)


def has_credentials(value: str) -> bool:
    """Whether ``value`` carries credentials: ``user:password@`` in a URL or a host list, or a
    ``password=`` (``token=``, ...) parameter as JDBC and signed URLs carry them."""
    return bool(_URL_USERINFO.search(value) or _BARE_USERINFO.search(value)
                or _SECRET_PARAMETER.search(value))


def _redact_assignment(match: re.Match[str]) -> str:
    if not is_secret_key(match.group("key")):
        return match.group(0)
    value = match.group("value")
    hidden = f"{value[0]}{REDACTED}{value[0]}" if value[:1] in ("'", '"') else REDACTED
    return f"{match.group('key')}{match.group('quote')}{match.group('sep')}{hidden}"


def redact_text(text: str) -> str:
    """``text`` with every secret-like value replaced by ``***``: values of secret-like names
    (``key=value``, ``key: value``, ``"key": "value"``), URL user info, secret parameters."""
    text = _URL_USERINFO.sub(rf"\g<1>{REDACTED}@", text)
    text = _BARE_USERINFO.sub(f"{REDACTED}@", text)
    text = _SECRET_PARAMETER.sub(rf"\g<1>{REDACTED}", text)
    return _ASSIGNMENT.sub(_redact_assignment, text)


def redact_value(name: str, value: str) -> str:
    """``value`` of the setting ``name``, as it may be shown."""
    return REDACTED if is_secret_key(name) else redact_text(value)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """An argument vector as it may be shown: ``KEY=VALUE`` arguments (``--conf``'s, ``-D``'s,
    environment assignments) by their key, the argument after a secret-like ``--flag`` whole."""
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append(REDACTED)
            hide_next = False
            continue
        key, sep, value = arg.partition("=")
        if sep and key:
            shown.append(f"{key}={redact_value(key.lstrip('-'), value)}")
        else:
            hide_next = arg.startswith("-") and is_secret_key(arg)
            shown.append(redact_text(arg))
    return shown


def quote_command(argv: Sequence[str]) -> str:
    """One POSIX shell line; leading ``NAME=value`` words stay environment assignments."""
    words: list[str] = []
    assigning = True
    for arg in argv:
        if assigning and _ENV_ASSIGNMENT.match(arg):
            name, _, value = arg.partition("=")
            words.append(f"{name}={shlex.quote(value)}")
            continue
        assigning = False
        words.append(shlex.quote(arg))
    return " ".join(words)


def redact_command(line: str) -> str:
    """A shell command line as it may be shown (log files, cron mail, terminals)."""
    line = redact_text(line)  # forms that span words (JSON, "key: value") before splitting
    try:
        argv = shlex.split(line)
    except ValueError:  # not a well-formed shell line: treat it as text
        return redact_text(line)
    return quote_command(redact_argv(argv))


class RedactingLogRecord(logging.LogRecord):
    """A log record whose message and traceback are redacted, whatever handler formats it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.exc_info and self.exc_info[0] is not None:
            # Formatters reuse exc_text when set, so the traceback is shown redacted too.
            self.exc_text = redact_text("".join(traceback.format_exception(*self.exc_info))).rstrip("\n")

    def getMessage(self) -> str:  # noqa: N802 - logging's name
        """The formatted message, redacted."""
        return redact_text(super().getMessage())


def install_log_redaction() -> None:
    """Make every log record of this process redact itself (idempotent)."""
    logging.setLogRecordFactory(RedactingLogRecord)


def main() -> int:
    """Copy standard input to standard output, each line redacted as a command line."""
    for line in sys.stdin:
        end = "\n" if line.endswith("\n") else ""
        sys.stdout.write(redact_command(line.rstrip("\n")) + end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
