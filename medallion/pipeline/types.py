"""Spark SQL type names, parsed without Spark: enough to tell timestamps, numbers and text apart.

A declaration names column types as Spark's DDL does (``STRING``, ``DECIMAL(18,4)``,
``ARRAY<STRING>``). :func:`parse_type` reads one into a :class:`SqlType`, whose ``str()`` is the
canonical spelling (upper case, Spark's aliases resolved, no spaces inside ``DECIMAL(p,s)``), so
two spellings of one type compare equal. Rules for aggregate result types follow Spark's own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_DECIMAL_PRECISION = 38

# Spark's aliases, mapped to the name Spark itself prints.
_ALIASES = {
    "STRING": "STRING", "VARCHAR": "STRING", "CHAR": "STRING", "TEXT": "STRING",
    "BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
    "TINYINT": "TINYINT", "BYTE": "TINYINT",
    "SMALLINT": "SMALLINT", "SHORT": "SMALLINT",
    "INT": "INT", "INTEGER": "INT",
    "BIGINT": "BIGINT", "LONG": "BIGINT",
    "FLOAT": "FLOAT", "REAL": "FLOAT",
    "DOUBLE": "DOUBLE",
    "DECIMAL": "DECIMAL", "DEC": "DECIMAL", "NUMERIC": "DECIMAL",
    "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP", "TIMESTAMP_LTZ": "TIMESTAMP", "TIMESTAMP_NTZ": "TIMESTAMP_NTZ",
    "BINARY": "BINARY",
    "VARIANT": "VARIANT",
    "ARRAY": "ARRAY", "MAP": "MAP", "STRUCT": "STRUCT",
}
INTEGRAL = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
FRACTIONAL = frozenset({"FLOAT", "DOUBLE"})
TIMESTAMPS = frozenset({"TIMESTAMP", "TIMESTAMP_NTZ"})
_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|`([^`]+)`|(\d+)|([<>(),:]))")


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _field_name(name: str) -> str:
    """A struct field's name as DDL spells it: in backticks unless it is a plain identifier."""
    return name if _PLAIN_NAME.fullmatch(name) else f"`{name}`"


class TypeNameError(ValueError):
    """A type name Spark would not accept; the message says what is wrong."""


@dataclass(frozen=True)
class SqlType:
    """A Spark SQL type: a name, and its parameters (decimal digits, element and field types)."""

    name: str
    precision: int | None = None  # DECIMAL only
    scale: int | None = None  # DECIMAL only
    args: tuple[SqlType, ...] = ()  # ARRAY: element; MAP: key, value; STRUCT: field types
    fields: tuple[str, ...] = ()  # STRUCT: field names, in order

    def __str__(self) -> str:
        if self.name == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.name in ("ARRAY", "MAP"):
            return f"{self.name}<{','.join(str(a) for a in self.args)}>"
        if self.name == "STRUCT":
            inner = ", ".join(f"{_field_name(n)}: {t}"
                              for n, t in zip(self.fields, self.args, strict=True))
            return f"STRUCT<{inner}>"
        return self.name

    @property
    def is_timestamp(self) -> bool:
        """An instant or local date-time (what ``window`` and ``session_window`` accept)."""
        return self.name in TIMESTAMPS

    @property
    def is_numeric(self) -> bool:
        """A number: integral, fractional or decimal."""
        return self.name in INTEGRAL or self.name in FRACTIONAL or self.name == "DECIMAL"

    @property
    def is_decimal(self) -> bool:
        """A fixed-point ``DECIMAL(p,s)``."""
        return self.name == "DECIMAL"

    @property
    def is_string(self) -> bool:
        """Text."""
        return self.name == "STRING"

    @property
    def is_orderable(self) -> bool:
        """A type ``min``/``max`` and ``ORDER BY`` accept (not a map, struct-free, not variant)."""
        return self.name not in ("MAP", "VARIANT")


STRING = SqlType("STRING")
BOOLEAN = SqlType("BOOLEAN")
BIGINT = SqlType("BIGINT")
INT = SqlType("INT")
DOUBLE = SqlType("DOUBLE")
TIMESTAMP = SqlType("TIMESTAMP")
STRING_ARRAY = SqlType("ARRAY", args=(STRING,))


def decimal(precision: int, scale: int) -> SqlType:
    """``DECIMAL(precision, scale)`` bounded as Spark bounds it (precision and scale at most 38)."""
    return SqlType("DECIMAL", min(precision, MAX_DECIMAL_PRECISION), min(scale, MAX_DECIMAL_PRECISION))


def sum_type(of: SqlType) -> SqlType:
    """What Spark's ``sum`` returns: DECIMAL(p+10, s) bounded, BIGINT, or DOUBLE."""
    if of.is_decimal:
        assert of.precision is not None and of.scale is not None
        return decimal(of.precision + 10, of.scale)
    return BIGINT if of.name in INTEGRAL else DOUBLE


def avg_type(of: SqlType) -> SqlType:
    """What Spark's ``avg`` returns: DECIMAL(p+4, s+4) bounded, or DOUBLE."""
    if of.is_decimal:
        assert of.precision is not None and of.scale is not None
        return decimal(of.precision + 4, of.scale + 4)
    return DOUBLE


def struct_field_names(of: SqlType) -> list[str]:
    """The names of every struct field ``of`` holds, at any depth (in arrays and maps too)."""
    names = list(of.fields)
    for inner in of.args:
        names += struct_field_names(inner)
    return names


def struct_path(of: SqlType, path: Sequence[str]) -> SqlType | None:
    """The type of the struct field at ``path`` inside ``of`` (``of`` itself for an empty path);
    None when ``path`` does not name fields of nested structs."""
    for name in path:
        if of.name != "STRUCT" or name not in of.fields:
            return None
        of = of.args[of.fields.index(name)]
    return of


def parse_type(text: str) -> SqlType:
    """The type ``text`` names, in Spark's DDL spelling; raises :class:`TypeNameError` if it is none."""
    tokens: list[str] = []
    position = 0
    stripped = text.strip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if not match or match.end() == position:
            raise TypeNameError(f"{text!r} is not a Spark SQL type (unexpected {stripped[position:]!r})")
        tokens.append(next(g for g in match.groups() if g is not None))
        position = match.end()
    parser = _Parser(tokens, text)
    parsed = parser.type()
    if parser.position != len(tokens):
        raise TypeNameError(f"{text!r} is not a Spark SQL type (unexpected {tokens[parser.position]!r})")
    return parsed


class _Parser:
    """Recursive descent over the tokens of one type name."""

    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.position = 0

    def _fail(self, problem: str) -> TypeNameError:
        return TypeNameError(f"{self.text!r} is not a Spark SQL type ({problem})")

    def _next(self) -> str:
        if self.position >= len(self.tokens):
            raise self._fail("it ends too early")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _expect(self, token: str) -> None:
        found = self._next()
        if found != token:
            raise self._fail(f"expected {token!r}, found {found!r}")

    def _number(self) -> int:
        token = self._next()
        if not token.isdigit():
            raise self._fail(f"expected a number, found {token!r}")
        return int(token)

    def type(self) -> SqlType:
        word = self._next()
        name = _ALIASES.get(word.upper())
        if name is None:
            known = ", ".join(sorted(set(_ALIASES.values())))
            raise self._fail(f"unknown type {word!r}; known: {known}")
        if name == "DECIMAL":
            return self._decimal()
        if name == "STRING" and word.upper() in ("VARCHAR", "CHAR"):
            self._expect("(")  # Spark needs the length, and reads the value as a STRING
            self._number()
            self._expect(")")
        if name == "ARRAY":
            self._expect("<")
            element = self.type()
            self._expect(">")
            return SqlType("ARRAY", args=(element,))
        if name == "MAP":
            self._expect("<")
            key = self.type()
            self._expect(",")
            value = self.type()
            self._expect(">")
            return SqlType("MAP", args=(key, value))
        if name == "STRUCT":
            return self._struct()
        return SqlType(name)

    def _decimal(self) -> SqlType:
        if self._peek() != "(":
            return SqlType("DECIMAL", 10, 0)  # Spark's default
        self._expect("(")
        precision, scale = self._number(), 0
        if self._peek() == ",":
            self._expect(",")
            scale = self._number()
        self._expect(")")
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise self._fail(f"DECIMAL({precision},{scale}) needs 1 <= precision <= 38 and "
                             "scale <= precision")
        return SqlType("DECIMAL", precision, scale)

    def _struct(self) -> SqlType:
        self._expect("<")
        names: list[str] = []
        types: list[SqlType] = []
        while True:
            names.append(self._next())
            if self._peek() == ":":
                self._expect(":")
            types.append(self.type())
            token = self._next()
            if token == ">":
                return SqlType("STRUCT", args=tuple(types), fields=tuple(names))
            if token != ",":
                raise self._fail(f"expected ',' or '>', found {token!r}")


# The names Spark's and Delta's JSON schemas give the types (``StructType.jsonValue()``, a Delta
# log's ``schemaString``), mapped to the DDL names.
_JSON_NAMES = {
    "string": "STRING", "boolean": "BOOLEAN", "byte": "TINYINT", "short": "SMALLINT",
    "integer": "INT", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "date": "DATE",
    "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ", "binary": "BINARY",
    "variant": "VARIANT"}
_JSON_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def from_schema_json(value: object) -> SqlType:
    """The type a JSON schema names, as Spark (``DataType.jsonValue()``) and Delta's log write
    them: ``"long"``, ``"decimal(18,4)"``, ``{"type": "struct", "fields": [...]}``. A type no
    declaration can name (``void``, an interval) keeps its own name, so it compares unequal to
    every declared one."""
    if isinstance(value, str):
        if value in _JSON_NAMES:
            return SqlType(_JSON_NAMES[value])
        decimal_match = _JSON_DECIMAL.fullmatch(value)
        if decimal_match:
            return SqlType("DECIMAL", int(decimal_match[1]), int(decimal_match[2]))
        return SqlType("DECIMAL", 10, 0) if value == "decimal" else SqlType(value.upper())
    if not isinstance(value, dict):
        raise TypeNameError(f"{value!r} is not a JSON schema type")
    kind = value.get("type")
    if kind == "array":
        return SqlType("ARRAY", args=(from_schema_json(value["elementType"]),))
    if kind == "map":
        return SqlType("MAP", args=(from_schema_json(value["keyType"]),
                                    from_schema_json(value["valueType"])))
    if kind == "struct":
        fields = value.get("fields", [])
        return SqlType("STRUCT", args=tuple(from_schema_json(f["type"]) for f in fields),
                       fields=tuple(f["name"] for f in fields))
    return SqlType(str(kind).upper())


def struct_of(columns: Sequence[tuple[str, SqlType]]) -> SqlType:
    """A table's columns as one STRUCT type (what a schema is)."""
    return SqlType("STRUCT", args=tuple(t for _, t in columns), fields=tuple(n for n, _ in columns))
