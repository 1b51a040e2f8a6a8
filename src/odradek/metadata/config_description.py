"""DescribeConfigs' view of a config: its value, where the value comes from, and its synonyms.

Kafka resolves a topic config in this order: the topic's own override
(DYNAMIC_TOPIC_CONFIG), a dynamic broker default set through AlterConfigs on the
cluster-wide broker resource (DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's
static config file (STATIC_BROKER_CONFIG), and finally the built-in default
(DEFAULT_CONFIG). The broker-side names come from TOPIC_CONFIG_SYNONYMS. The
synonyms list shows every level that is set, highest precedence first, so a
client can see what it would fall back to if it removed an override.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from odradek.metadata.topic_config_synonyms import TOPIC_CONFIG_SYNONYMS


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's config source (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(IntEnum):
    """DescribeConfigsResponse's config type (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One entry of a DescribeConfigs result."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None
    is_sensitive: bool = False
    synonyms: tuple[ConfigValue, ...] = field(default=())


def config_type(kind: Any) -> ConfigType:
    """A definition's type (a ConfigType, a Kafka type name like "long", or a Python type)."""
    if isinstance(kind, ConfigType):
        return kind
    if isinstance(kind, str):
        return ConfigType.__members__.get(kind.upper(), ConfigType.UNKNOWN)
    return {bool: ConfigType.BOOLEAN, int: ConfigType.LONG, float: ConfigType.DOUBLE, str: ConfigType.STRING,
            list: ConfigType.LIST}.get(kind, ConfigType.UNKNOWN)


def config_string(value: Any) -> str | None:
    """A config value as Kafka prints it: lists comma-joined, booleans lower-case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True, slots=True)
class BrokerConfigLayers:
    """The broker-side config levels a topic config can fall back to."""

    #: Set through AlterConfigs on the cluster-wide broker resource ("").
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    #: Set in server.properties or on the command line.
    static: Mapping[str, str] = field(default_factory=dict)
    #: The broker configs' built-in defaults (only those that have one).
    defaults: Mapping[str, str] = field(default_factory=dict)


def _broker_synonyms(topic_name: str, layers: BrokerConfigLayers) -> list[ConfigValue]:
    found: list[ConfigValue] = []
    synonyms = TOPIC_CONFIG_SYNONYMS.get(topic_name, ())
    for source, level in (
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, layers.dynamic_default),
        (ConfigSource.STATIC_BROKER_CONFIG, layers.static),
        (ConfigSource.DEFAULT_CONFIG, layers.defaults),
    ):
        found.extend(ConfigValue(s.name, level[s.name], source) for s in synonyms if s.name in level)
    return found


def describe_topic_configs(
    definitions: Iterable[tuple[str, Any, Any, str]],
    overrides: Mapping[str, str],
    layers: BrokerConfigLayers,
) -> list[DescribedConfig]:
    """Every topic config with its effective value, source and synonyms.

    ``definitions`` are (kafka name, type, built-in default, doc) as LogConfig.definitions()
    gives them; ``overrides`` the topic's own configs.
    """
    described = []
    for name, kind, default, doc in definitions:
        synonyms: list[ConfigValue] = []
        if name in overrides:
            synonyms.append(ConfigValue(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker = _broker_synonyms(name, layers)
        synonyms.extend(broker)
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif broker:
            first = broker[0]
            convert = next(s.convert for s in TOPIC_CONFIG_SYNONYMS[name] if s.name == first.name)
            value, source = convert(first.value), first.source
        else:
            value, source = config_string(default), ConfigSource.DEFAULT_CONFIG
            synonyms.append(ConfigValue(name, value, source))
        described.append(
            DescribedConfig(
                name=name,
                value=value,
                source=source,
                read_only=False,
                config_type=config_type(kind),
                documentation=doc,
                synonyms=tuple(synonyms),
            )
        )
    return described
