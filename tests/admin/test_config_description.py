from odradek.metadata.config_description import (
    BrokerConfigLayers,
    ConfigSource,
    ConfigType,
    ConfigValue,
    describe_topic_configs,
)
from odradek.metadata.topic_config_synonyms import topic_defaults_from_broker

DEFINITIONS = [
    ("retention.ms", "long", 604800000, "How long to keep data."),
    ("cleanup.policy", "list", ["delete"], "delete or compact."),
    ("remote.storage.enable", "boolean", False, "Tiered storage."),
]
BROKER_DEFAULTS = {"log.retention.hours": "168", "log.cleanup.policy": "delete"}


def by_name(layers: BrokerConfigLayers, overrides: dict[str, str]):
    return {c.name: c for c in describe_topic_configs(DEFINITIONS, overrides, layers)}


def test_built_in_defaults_come_from_broker_synonyms() -> None:
    configs = by_name(BrokerConfigLayers(defaults=BROKER_DEFAULTS), {})
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == ("604800000", ConfigSource.DEFAULT_CONFIG)
    assert retention.synonyms == (
        ConfigValue("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert retention.config_type == ConfigType.LONG
    remote = configs["remote.storage.enable"]
    assert (remote.value, remote.source, remote.config_type) == (
        "false",
        ConfigSource.DEFAULT_CONFIG,
        ConfigType.BOOLEAN,
    )


def test_precedence_override_dynamic_static_default() -> None:
    layers = BrokerConfigLayers(
        dynamic_default={"log.retention.ms": "5000"},
        static={"log.retention.minutes": "2"},
        defaults=BROKER_DEFAULTS,
    )
    retention = by_name(layers, {"retention.ms": "1000"})["retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s.source for s in retention.synonyms] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    without_override = by_name(layers, {})["retention.ms"]
    assert (without_override.value, without_override.source) == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    static_only = by_name(
        BrokerConfigLayers(static={"log.retention.minutes": "2"}, defaults=BROKER_DEFAULTS), {}
    )
    assert (static_only["retention.ms"].value, static_only["retention.ms"].source) == (
        "120000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )


def test_topic_defaults_from_broker_first_synonym_wins() -> None:
    assert topic_defaults_from_broker(
        {"log.retention.hours": "1", "log.retention.minutes": "3"}
    ) == {"retention.ms": "180000"}
    assert topic_defaults_from_broker({"log.retention.hours": "-1"}) == {"retention.ms": "-1"}
    assert topic_defaults_from_broker({"message.max.bytes": "10"}) == {"max.message.bytes": "10"}


def test_real_topic_definitions_with_broker_defaults() -> None:
    """LogConfig's definitions and the broker's config defaults give Kafka's DescribeConfigs view."""
    from odradek.server.config import CONFIG_DEFS
    from odradek.storage.config import LogConfig

    layers = BrokerConfigLayers(
        static={"log.segment.bytes": "1048576"},
        defaults={n: d.default for n, d in CONFIG_DEFS.items() if d.default is not None},
    )
    configs = {c.name: c for c in describe_topic_configs(LogConfig.definitions(), {}, layers)}
    assert set(configs) == {name for name, *_ in LogConfig.definitions()}
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "604800000",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert configs["retention.ms"].synonyms[0].name == "log.retention.hours"
    assert (configs["segment.bytes"].value, configs["segment.bytes"].source) == (
        "1048576",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert configs["max.message.bytes"].synonyms[0] == ConfigValue(
        "message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG
    )
    assert configs["cleanup.policy"].config_type == ConfigType.LIST
    assert configs["segment.bytes"].config_type == ConfigType.INT
