"""Typed values out of a pipeline definition's YAML, each error naming its key path and file."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from medallion.config.durations import parse_duration_seconds
from medallion.config.yamlfiles import Origins
from medallion.errors import ConfigError
from medallion.pipeline import schema
from medallion.pipeline.errors import PipelineError
from medallion.pipeline.kinds import (
    IDENTIFIER,
    ROW_LEVEL_TYPES,
    SUPPORTED_TYPES,
    Severity,
)
from medallion.pipeline.model import (
    ExpectationSpec,
    TableDoc,
)
from medallion.pipeline.types import SqlType, TypeNameError, parse_type, struct_field_names

PYTHON_STEP = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


# Characters Delta refuses in column names, nested ones included (without column mapping).
NOT_IN_DELTA_NAMES = re.compile(r"[ ,;{}()\n\t=]")


DELTA_NAMES = ("holds a character a Delta table's column names cannot (a space or one of ,;{}()=, "
                "a tab or a line break)")


E = TypeVar("E", bound=Enum)


EXPECTATION_KEYS = set(schema.EXPECTATION)


class DeclarationReader:
    """Typed values out of the tree, every problem raised with its key path and file."""

    def __init__(self, origins: Origins, file: str) -> None:
        self.origins = origins
        self.file = file

    def error(self, key: str, problem: str) -> PipelineError:
        """The error for ``key``, naming the file it came from."""
        return PipelineError(key, self.origins.of(key, self.file), problem)

    @staticmethod
    def _join(prefix: str, key: str) -> str:
        return f"{prefix}.{key}" if prefix else key

    def keys(self, section: Mapping[str, Any], prefix: str, allowed: set[str]) -> None:
        """Refuse keys that are not in ``allowed`` (a typo must not pass silently)."""
        for key in section:
            if key not in allowed:
                hint = ""
                if re.fullmatch(r"\s*\d+\)", str(key)):
                    # `{type: DECIMAL(10,2)}`: YAML's flow mapping split the type at its comma.
                    hint = "; a type with a comma inside {...} must be quoted: \"DECIMAL(10,2)\""
                raise self.error(self._join(prefix, key),
                                 f"unknown key (known keys: {', '.join(sorted(allowed))}){hint}")

    def mapping(self, section: Mapping[str, Any], key: str, prefix: str,
                allowed: set[str] | None = None, required: bool = False) -> Mapping[str, Any]:
        """A nested mapping; ``{}`` when absent (unless required)."""
        dotted = self._join(prefix, key)
        value = section.get(key)
        if value is None:
            if required:
                raise self.error(dotted, "required")
            return {}
        if not isinstance(value, Mapping):
            raise self.error(dotted, f"must be a mapping, got {value!r}")
        if allowed is not None:
            self.keys(value, dotted, allowed)
        return value

    def entries(self, section: Mapping[str, Any], key: str, prefix: str = "") -> Mapping[str, Any]:
        """A mapping of names (identifiers) to their definitions."""
        value = self.mapping(section, key, prefix)
        for name in value:
            if not IDENTIFIER.match(name):
                raise self.error(self._join(self._join(prefix, key), name),
                                 "a name must be letters, digits and _, not starting with a digit")
        return value

    def text(self, section: Mapping[str, Any], key: str, default: str | None = None,
             prefix: str = "") -> str:
        """A non-empty string (``default`` when absent; required when there is none)."""
        dotted = self._join(prefix, key)
        value = section.get(key, default)
        if value is None:
            raise self.error(dotted, "required")
        if not isinstance(value, str) or (not value.strip() and default != ""):
            raise self.error(dotted, f"must be a non-empty string, got {value!r}")
        return value.strip()

    def optional_text(self, section: Mapping[str, Any], key: str, prefix: str) -> str | None:
        """A non-empty string, or None when absent."""
        return None if section.get(key) is None else self.text(section, key, prefix=prefix)

    def boolean(self, section: Mapping[str, Any], key: str, default: bool, prefix: str) -> bool:
        """true or false."""
        value = section.get(key, default)
        if not isinstance(value, bool):
            raise self.error(self._join(prefix, key), f"must be true or false, got {value!r}")
        return value

    def names(self, section: Mapping[str, Any], key: str, prefix: str,
              default: Sequence[str] | None = None) -> tuple[str, ...]:
        """A list of names (a single name counts as a list of one); ``default`` when absent."""
        dotted = self._join(prefix, key)
        value = section.get(key)
        if value is None:
            if default is None:
                raise self.error(dotted, "required")
            return tuple(default)
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
            raise self.error(dotted, f"must be a name or a list of names, got {value!r}")
        if len(set(items)) != len(items):
            raise self.error(dotted, f"names a column twice: {value!r}")
        return tuple(i.strip() for i in items)

    def choice(self, section: Mapping[str, Any], key: str, enum: type[E], prefix: str,
               default: E | None = None) -> E:
        """A value of ``enum``."""
        dotted = self._join(prefix, key)
        value = section.get(key, default.value if default is not None else None)
        if value is None:
            raise self.error(dotted, f"required, one of {', '.join(str(e.value) for e in enum)}")
        try:
            return enum(value)
        except ValueError:
            raise self.error(dotted, f"{value!r} is not one of "
                             f"{', '.join(str(e.value) for e in enum)}") from None

    def duration(self, section: Mapping[str, Any], key: str, default: str | None = None,
                 prefix: str = "", positive: bool = False) -> str:
        """A Spark duration such as ``5 minutes`` (``positive``: not zero, as a window's size,
        slide or gap, which Spark refuses only once the query starts)."""
        dotted = self._join(prefix, key)
        text = self.text(section, key, default, prefix)
        try:
            seconds = parse_duration_seconds(text, dotted, self.file)
        except ConfigError:
            raise self.error(dotted, f"{text!r} is not a duration like '5 minutes'") from None
        if positive and seconds == 0:
            raise self.error(dotted, f"{text!r}: must be longer than zero")
        return text

    def sql_type(self, value: Any, key: str) -> SqlType:
        """A Spark SQL type name."""
        if not isinstance(value, str):
            raise self.error(key, f"must be a Spark SQL type name such as STRING, got {value!r}")
        try:
            parsed = parse_type(value)
        except TypeNameError as exc:
            raise self.error(key, str(exc)) from None
        bad = [name for name in struct_field_names(parsed) if NOT_IN_DELTA_NAMES.search(name)]
        if bad:  # Spark accepts them; a Delta table without column mapping does not
            raise self.error(key, f"struct field {bad[0]!r} of {value!r} {DELTA_NAMES}")
        return parsed

    def python_step(self, section: Mapping[str, Any], key: str, prefix: str) -> str | None:
        """``module:function``, or None (importing it is the validator's job)."""
        value = self.optional_text(section, key, prefix)
        if value is not None and not PYTHON_STEP.match(value):
            raise self.error(self._join(prefix, key), f"{value!r} is not module:function")
        return value

    def doc(self, section: Mapping[str, Any], prefix: str, table: str) -> TableDoc:
        """Comments and expectations of the table ``table`` (``layer/name``)."""
        comments = self.mapping(section, "column_comments", prefix)
        for column, comment in comments.items():
            if not isinstance(comment, str):
                raise self.error(f"{prefix}.column_comments.{column}", "must be text")
        expectations = []
        for name, entry in self.entries(section, "expectations", prefix).items():
            expectation = self._expectation(table, name, entry, f"{prefix}.expectations.{name}")
            if expectation is not None:
                expectations.append(expectation)
        return TableDoc(comment=self.text(section, "comment", "", prefix),
                        column_comments={str(k): str(v).strip() for k, v in comments.items()},
                        expectations=tuple(expectations),
                        zorder=self.names(section, "zorder", prefix, default=()),
                        cluster_by=self.names(section, "cluster_by", prefix, default=()))

    def _expectation(self, table: str, name: str, entry: Any, key: str) -> ExpectationSpec | None:
        """One expectation; its type, severity and the shape of its arguments are checked here,
        the arguments themselves by Great Expectations (:func:`medallion.quality.spec.check_expectations`)."""
        if not isinstance(entry, Mapping):
            raise self.error(key, "must be a mapping with expectation, kwargs, severity")
        self.keys(entry, key, EXPECTATION_KEYS)
        if not self.boolean(entry, "enabled", True, key):
            return None  # an overlay turns one off by name
        kind = entry.get("expectation")
        if not isinstance(kind, str) or kind not in SUPPORTED_TYPES:
            raise self.error(f"{key}.expectation",
                             f"{kind!r} is not an expectation the gate supports "
                             f"({', '.join(sorted(SUPPORTED_TYPES))})")
        severity = self.choice(entry, "severity", Severity, key)
        if severity is Severity.DROP and kind not in ROW_LEVEL_TYPES:
            raise self.error(f"{key}.severity", f"drop needs a row-level expectation; {kind} judges "
                             "the whole batch (use warn or fail)")
        kwargs = self.mapping(entry, "kwargs", key)
        # An overlay may change one argument: the file to name is the one that changed it last.
        kwargs_key = f"{key}.kwargs"
        whole = self.origins.of(kwargs_key, self.file)
        changed = [self.origins.of(f"{kwargs_key}.{argument}", self.file) for argument in kwargs]
        return ExpectationSpec(
            table=table, name=name, expectation_type=kind, kwargs=dict(kwargs), severity=severity,
            source=self.origins.of(f"{key}.expectation", self.file),
            description=self.text(entry, "description", "", key),
            kwargs_source=next((o for o in reversed(changed) if o != whole), whole),
            declared_at=key)
