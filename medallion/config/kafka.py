"""The ``kafka`` settings: brokers, offsets, client options and security, secrets only as the
names of environment variables."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from medallion.config.jvm import connector_release_problem, spark_version
from medallion.config.model import KafkaProtocol, KafkaSecurity, KafkaSettings
from medallion.config.reader import ENV_NAME, SettingsReader, boolean, shown
from medallion.config.yamlfiles import Origins
from medallion.errors import ConfigError

_BOOTSTRAP = re.compile(r"^[A-Za-z0-9._\[\]:-]+:\d{1,5}(,[A-Za-z0-9._\[\]:-]+:\d{1,5})*$")
TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SECRET_WORDS = ("password", "secret", "jaas", "token", "key")  # never from a file
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def kafka_settings(reader: SettingsReader, source: Origins) -> KafkaSettings:
    """The ``kafka`` section; secrets only as names of environment variables, which must be set.
    Its ``publish`` entries name declared tables: :mod:`medallion.project` reads them."""
    section = reader.section("kafka", {
        "bootstrap_servers", "starting_offsets", "max_offsets_per_trigger",
        "fail_on_data_loss", "poll_timeout_ms", "client_options", "security", "publish",
        "connector_version"})
    bootstrap = reader.string(section, "kafka.bootstrap_servers", "127.0.0.1:9092").replace(" ", "")
    if not _BOOTSTRAP.match(bootstrap):
        raise ConfigError("kafka.bootstrap_servers", source.of("kafka.bootstrap_servers"),
                          f"{bootstrap!r} is not a list of host:port")
    starting = reader.string(section, "kafka.starting_offsets", "earliest")
    if starting not in ("earliest", "latest"):
        try:
            parsed = json.loads(starting)
        except json.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigError("kafka.starting_offsets", source.of("kafka.starting_offsets"),
                              "must be earliest, latest, or JSON like "
                              '{"topic": {"0": 23, "1": -2}}')
    max_offsets = section.get("max_offsets_per_trigger")
    if max_offsets is not None:
        max_offsets = reader.positive_int(section, "kafka.max_offsets_per_trigger", 1)
    poll_timeout = section.get("poll_timeout_ms")
    if poll_timeout is not None:
        poll_timeout = reader.positive_int(section, "kafka.poll_timeout_ms", 1)
    fail_on_data_loss = section.get("fail_on_data_loss", True)
    if not isinstance(fail_on_data_loss, bool):
        raise ConfigError("kafka.fail_on_data_loss", source.of("kafka.fail_on_data_loss"),
                          f"must be true or false, got {fail_on_data_loss!r}")
    client = section.get("client_options", {}) or {}
    if not isinstance(client, Mapping):
        raise ConfigError("kafka.client_options", source.of("kafka.client_options"),
                          "must be a mapping of Kafka client properties")
    for name in client:
        key = f"kafka.client_options.{name}"
        if any(word in str(name).lower() for word in _SECRET_WORDS) or str(name).startswith(
                ("security.", "sasl.", "ssl.")):
            raise ConfigError(key, source.of(key), "security settings and secrets belong in "
                              "kafka.security (secrets as environment variable names)")
    return KafkaSettings(
        bootstrap_servers=bootstrap,
        starting_offsets=starting,
        max_offsets_per_trigger=max_offsets,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout,
        client_options={str(k): str(v).lower() if isinstance(v, bool) else str(v)
                        for k, v in client.items()},
        security=_kafka_security(source, section),
        connector_version=_connector_version(source, section),
    )

def _connector_version(source: Origins, kafka: Mapping[str, Any]) -> str | None:
    value = kafka.get("connector_version")
    if value is None:
        return None
    problem = (connector_release_problem(value.strip()) if isinstance(value, str)
               else f"must be a Spark release like {spark_version()}, or null, got {value!r}")
    if problem:
        raise ConfigError("kafka.connector_version", source.of("kafka.connector_version"), problem)
    return str(value).strip()

_STORE_TYPES = ("JKS", "PKCS12", "PEM")

_TLS_PROTOCOLS = (KafkaProtocol.SSL, KafkaProtocol.SASL_SSL)

def _kafka_security(source: Origins, kafka: Mapping[str, Any]) -> KafkaSecurity:
    prefix = "kafka.security"
    section = kafka.get("security", {}) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(prefix, source.of(prefix), "must be a mapping")
    texts = ("sasl_mechanism", "username_env", "password_env", "truststore_location",
             "truststore_type", "truststore_password_env", "keystore_location", "keystore_type",
             "keystore_password_env", "key_password_env")
    allowed = {"protocol", "allow_cleartext_password", *texts}
    for name in section:
        if name not in allowed:
            raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                              f"unknown key (known keys: {', '.join(sorted(allowed))})")
    protocol_text = str(section.get("protocol", "PLAINTEXT")).upper()
    try:
        protocol = KafkaProtocol(protocol_text)
    except ValueError:
        raise ConfigError(f"{prefix}.protocol", source.of(f"{prefix}.protocol"),
                          f"{protocol_text!r} is not one of "
                          f"{', '.join(p.value for p in KafkaProtocol)}") from None
    values: dict[str, str | None] = {}
    for name in texts:
        key = f"{prefix}.{name}"
        value = section.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(key, source.of(key),
                              f"must be a non-empty string or null, got {shown(key, value)}")
        values[name] = value.strip() if isinstance(value, str) else None
    allow_cleartext = boolean(section, f"{prefix}.allow_cleartext_password", False, source)
    sasl = protocol in (KafkaProtocol.SASL_PLAINTEXT, KafkaProtocol.SASL_SSL)
    if sasl:
        mechanism = (values["sasl_mechanism"] or "").upper()
        if mechanism not in _SASL_MECHANISMS:
            raise ConfigError(f"{prefix}.sasl_mechanism", source.of(f"{prefix}.sasl_mechanism"),
                              f"must be one of {', '.join(_SASL_MECHANISMS)} with {protocol.value}")
        values["sasl_mechanism"] = mechanism
        for name in ("username_env", "password_env"):
            if not values[name]:
                raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                                  f"{protocol.value} needs the name of an environment variable")
        if (protocol is KafkaProtocol.SASL_PLAINTEXT and mechanism == "PLAIN"
                and not allow_cleartext):
            raise ConfigError(f"{prefix}.protocol", source.of(f"{prefix}.protocol"),
                              "SASL_PLAINTEXT with PLAIN sends the password over the network as "
                              "clear text: use SASL_SSL (or SCRAM), or set "
                              f"{prefix}.allow_cleartext_password: true for a trusted network")
    for store in ("truststore", "keystore"):
        key = f"{prefix}.{store}_type"
        if values[f"{store}_type"] is not None:
            kind = str(values[f"{store}_type"]).upper()
            if kind not in _STORE_TYPES:
                raise ConfigError(key, source.of(key),
                                  f"{kind!r} is not one of {', '.join(_STORE_TYPES)}")
            values[f"{store}_type"] = kind
        location = values[f"{store}_location"]
        if location and values[f"{store}_type"] is None:
            # Kafka's default type is JKS whatever the file; the suffix says better.
            suffix = location.rpartition(".")[2].lower()
            values[f"{store}_type"] = {"p12": "PKCS12", "pfx": "PKCS12", "pem": "PEM",
                                       "crt": "PEM"}.get(suffix, "JKS")
    if values["keystore_location"] and protocol not in _TLS_PROTOCOLS:
        raise ConfigError(f"{prefix}.keystore_location", source.of(f"{prefix}.keystore_location"),
                          f"a client certificate (mTLS) needs protocol SSL or SASL_SSL, not "
                          f"{protocol.value}")
    for name, needs in (("keystore_password_env", "keystore_location"),
                        ("key_password_env", "keystore_location"),
                        ("truststore_password_env", "truststore_location")):
        if values[name] and not values[needs]:
            raise ConfigError(f"{prefix}.{name}", source.of(f"{prefix}.{name}"),
                              f"set only with {prefix}.{needs}")
    if (values["keystore_location"] and values["keystore_type"] != "PEM"
            and not values["keystore_password_env"]):
        raise ConfigError(f"{prefix}.keystore_password_env",
                          source.of(f"{prefix}.keystore_location"),
                          "a JKS or PKCS12 keystore needs the name of the environment variable "
                          "holding its password (never the password itself)")
    for name in ("username_env", "password_env", "truststore_password_env",
                 "keystore_password_env", "key_password_env"):
        variable = values[name]
        if variable is None:
            continue
        key = f"{prefix}.{name}"
        if not ENV_NAME.match(variable):
            # Not echoed: a value here that is no variable name is most likely the secret itself.
            raise ConfigError(key, source.of(key),
                              "is not an environment variable name (the value is not shown; the "
                              "secret itself never goes in a file, only the variable's name)")
        if (sasl or name not in ("username_env", "password_env")) and not os.environ.get(variable):
            raise ConfigError(key, source.of(key), f"environment variable {variable} is not set")
    return KafkaSecurity(protocol=protocol, allow_cleartext_password=allow_cleartext, **values)
