"""DescribeConfigs' view of a config: its value, where the value comes from, and its synonyms.

Kafka resolves a topic config in this order: the topic's own override
(DYNAMIC_TOPIC_CONFIG), a dynamic config set through AlterConfigs on this
broker's resource (DYNAMIC_BROKER_CONFIG, resource name = node id) or on the
cluster-wide default resource "" (DYNAMIC_DEFAULT_BROKER_CONFIG), the broker's
static config file (STATIC_BROKER_CONFIG), and finally the built-in default
(DEFAULT_CONFIG). The broker-side names come from TOPIC_CONFIG_SYNONYMS. The
synonyms list shows every level that is set, highest precedence first, so a
client can see what it would fall back to if it removed an override.

A broker config is described the same way with Kafka's broker synonyms
(log.retention.ms, .minutes, .hours are one config): every level of every
synonym, per-broker dynamic first, then leading entries of other names dropped
(Kafka's ConfigHelper.configSynonyms), so log.retention.hours does not claim
log.retention.ms's dynamic value as its own.
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
    return {
        bool: ConfigType.BOOLEAN,
        int: ConfigType.LONG,
        float: ConfigType.DOUBLE,
        str: ConfigType.STRING,
        list: ConfigType.LIST,
    }.get(kind, ConfigType.UNKNOWN)


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

    #: Set through AlterConfigs on this broker's resource (its node id).
    dynamic_broker: Mapping[str, str] = field(default_factory=dict)
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
        (ConfigSource.DYNAMIC_BROKER_CONFIG, layers.dynamic_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, layers.dynamic_default),
        (ConfigSource.STATIC_BROKER_CONFIG, layers.static),
        (ConfigSource.DEFAULT_CONFIG, layers.defaults),
    ):
        found.extend(
            ConfigValue(s.name, level[s.name], source) for s in synonyms if s.name in level
        )
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
        value: str | None
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif broker:
            first = broker[0]
            assert first.value is not None, "broker layers map names to strings"
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


#: Broker configs that are one config under several names (Kafka's DynamicBrokerConfig.brokerConfigSynonyms).
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_config_synonyms(name: str) -> list[str]:
    """The names that set broker config ``name``, highest precedence first."""
    if name == "log.flush.interval.ms":  # log.flush.scheduler.interval.ms is its default
        return [name, "log.flush.scheduler.interval.ms"]
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]


@dataclass(frozen=True, slots=True)
class BrokerConfigDefinition:
    """What DescribeConfigs reports about a known broker config besides its value."""

    config_type: ConfigType
    documentation: str | None
    #: Changeable through AlterConfigs (Kafka's DynamicBrokerConfig.AllDynamicConfigs).
    dynamic: bool


def _broker_config_synonyms(name: str, layers: BrokerConfigLayers) -> list[ConfigValue]:
    found: list[ConfigValue] = []
    names = broker_config_synonyms(name)
    for source, level in (
        (ConfigSource.DYNAMIC_BROKER_CONFIG, layers.dynamic_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, layers.dynamic_default),
        (ConfigSource.STATIC_BROKER_CONFIG, layers.static),
        (ConfigSource.DEFAULT_CONFIG, layers.defaults),
    ):
        found.extend(ConfigValue(n, level[n], source) for n in names if n in level)
    while found and found[0].name != name:
        found.pop(0)
    return found


def describe_broker_configs(
    definitions: Mapping[str, BrokerConfigDefinition],
    layers: BrokerConfigLayers,
    per_broker: bool,
) -> list[DescribedConfig]:
    """The configs of a BROKER resource, as Kafka's ConfigHelper describes them.

    ``per_broker`` (resource name = node id): every known config and every
    config set at some level, with its effective value. Otherwise (the cluster
    default resource ""): only what was set there, with only that level as
    synonyms. Names unknown to ``definitions`` have type UNKNOWN and are read-only.
    """
    if per_broker:
        names = (
            set(definitions)
            | set(layers.static)
            | set(layers.dynamic_default)
            | set(layers.dynamic_broker)
        )
    else:
        names = set(layers.dynamic_default)
    described = []
    for name in sorted(names):
        definition = definitions.get(
            name, BrokerConfigDefinition(ConfigType.UNKNOWN, None, dynamic=False)
        )
        sensitive = definition.config_type is ConfigType.PASSWORD
        synonyms = _broker_config_synonyms(name, layers)
        value: str | None
        if not per_broker:
            synonyms = [
                s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            value = layers.dynamic_default[name]
        else:
            levels = (layers.dynamic_broker, layers.dynamic_default, layers.static, layers.defaults)
            value = next((level[name] for level in levels if name in level), None)
        if sensitive:
            synonyms = [ConfigValue(s.name, None, s.source) for s in synonyms]
        described.append(
            DescribedConfig(
                name=name,
                value=None if sensitive else value,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=not definition.dynamic,
                config_type=definition.config_type,
                documentation=definition.documentation,
                is_sensitive=sensitive,
                synonyms=tuple(synonyms),
            )
        )
    return described
