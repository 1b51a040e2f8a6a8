"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

Topic overrides live in the MetadataStore; the ReplicaManager hears of every
change and hands the new LogConfig to the live Log, so a new retention.ms or
max.message.bytes takes effect at once and survives a restart. Broker-level
dynamic configs are those Kafka lets an operator change at run time
(server/dynamic_broker_config.py); the log.* defaults of topic configs among
them apply to live logs at once. As in Kafka they are kept per
BROKER resource: "" is the cluster-wide default, a node id is that broker
alone and wins over the default; both persist in the MetadataStore.

Authorization, as Kafka's ConfigHelper and KafkaApis: describing needs DESCRIBE_CONFIGS,
altering ALTER_CONFIGS, on the topic for a TOPIC resource (else TOPIC_AUTHORIZATION_FAILED)
and on the cluster for a BROKER or BROKER_LOGGER one (else CLUSTER_AUTHORIZATION_FAILED),
each resource on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace

from odradek.metadata.config_description import (
    BrokerConfigDefinition,
    BrokerConfigLayers,
    ConfigType,
    DescribedConfig,
    config_type,
    describe_broker_configs,
    describe_topic_configs,
)
from odradek.metadata.config_ops import apply_incremental
from odradek.metadata.image import TopicImage
from odradek.metadata.topic_config_synonyms import topic_defaults_from_broker
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import CLUSTER_NAME, AclOperation, ResourceType, authorize
from odradek.server.config import CONFIG_DEFS, BrokerConfig, ConfigError, parse_config_value
from odradek.server.context import RequestContext
from odradek.server.dynamic_broker_config import (
    DYNAMIC_BROKER_CONFIGS,
    base_config_name,
    check_dynamic_update,
)
from odradek.storage import LogConfig
from odradek.storage.errors import InvalidConfig

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

log = logging.getLogger(__name__)


class InvalidRequest(KafkaError):
    error_code = ErrorCode.invalid_request


class UnknownTopic(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


# -- topic configs -------------------------------------------------------------------------


def topic_config_names() -> frozenset[str]:
    return frozenset(name for name, *_ in LogConfig.definitions())


def validated_topic_config(ctx: RequestContext, overrides: Mapping[str, str | None]) -> LogConfig:
    """The LogConfig these overrides give on this broker; InvalidConfig names the bad key.

    Each value is first read as its Kafka type by the broker configs' parser, so a value of
    the wrong type is answered in Kafka's words (key, value, expected type); ranges and
    allowed values are then LogConfig's to check.
    """
    kinds = {name: kind for name, kind, *_ in LogConfig.definitions()}
    for name, value in overrides.items():
        if name not in kinds:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic configs: {name}")
        try:
            parse_config_value(name, kinds[name], value)
        except ConfigError as exc:
            raise InvalidConfig(str(exc)) from None
    try:
        return LogConfig.from_properties(overrides, base=ctx.broker.replica_manager.default_config)
    except InvalidConfig:
        raise
    except ValueError as exc:  # a parser error the storage layer did not wrap
        raise InvalidConfig(str(exc)) from None


def broker_layers(ctx: RequestContext) -> BrokerConfigLayers:
    return BrokerConfigLayers(
        dynamic_broker=ctx.broker.metadata.broker_configs(str(ctx.broker.node_id)),
        dynamic_default=ctx.broker.metadata.broker_configs(),
        static=ctx.broker.config.originals,
        defaults={name: d.default for name, d in CONFIG_DEFS.items() if d.default is not None},
    )


def describe_topic(ctx: RequestContext, topic: TopicImage) -> list[DescribedConfig]:
    return describe_topic_configs(LogConfig.definitions(), topic.configs, broker_layers(ctx))


def _require_topic(ctx: RequestContext, name: str) -> TopicImage:
    topic = ctx.broker.metadata.topic(name)
    if topic is None:
        raise UnknownTopic(f"Topic {name} does not exist")
    return topic


def _set_topic_overrides(
    ctx: RequestContext, name: str, overrides: dict[str, str], validate_only: bool
) -> None:
    validated_topic_config(ctx, overrides)
    if not validate_only:
        ctx.broker.metadata.set_topic_configs(name, overrides)


# -- broker configs ------------------------------------------------------------------------

BROKER_CONFIG_DEFINITIONS = {
    name: BrokerConfigDefinition(config_type(d.type), d.doc, dynamic=name in DYNAMIC_BROKER_CONFIGS)
    for name, d in CONFIG_DEFS.items()
}


def _check_broker_name(ctx: RequestContext, name: str) -> None:
    node_id = str(ctx.broker.node_id)
    if name not in ("", node_id):
        raise InvalidRequest(
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
        )


def dynamic_broker_configs(metadata, node_id: int) -> dict[str, str]:
    """This broker's dynamic configs: the cluster default overlaid by its own (per-broker wins)."""
    return {**metadata.broker_configs(), **metadata.broker_configs(str(node_id))}


def default_log_config(config: BrokerConfig, dynamic: Mapping[str, str]) -> LogConfig:
    """The broker-wide LogConfig: static log.* configs overlaid by dynamic ones (first synonym wins)."""
    props = config.log_config_properties()
    props.update(topic_defaults_from_broker({**config.originals, **dynamic}))
    known = topic_config_names()
    return LogConfig.from_properties({k: v for k, v in props.items() if k in known})


def _set_broker_configs(
    ctx: RequestContext, resource: str, configs: dict[str, str], validate_only: bool
) -> None:
    check_dynamic_update(configs, per_broker=resource != "")
    metadata = ctx.broker.metadata
    levels = {
        "": metadata.broker_configs(),
        str(ctx.broker.node_id): metadata.broker_configs(str(ctx.broker.node_id)),
    }
    levels[resource] = configs
    dynamic = {**levels[""], **levels[str(ctx.broker.node_id)]}
    listeners = ctx.broker.components["dynamic_listener_config"]
    try:
        BrokerConfig({**ctx.broker.config.originals, **dynamic})
        default = default_log_config(ctx.broker.config, dynamic)
        ssl_changes = listeners.validate(dynamic)  # a key store that does not load is refused
    except (ConfigError, ValueError) as exc:
        raise InvalidConfig(str(exc)) from None
    if not validate_only:
        metadata.set_broker_configs(configs, resource)
        ctx.broker.replica_manager.update_default_config(default)
        ctx.broker.components["add_partitions_to_txn"].reconfigure(dynamic)
        listeners.reconfigure(ssl_changes)


def describe_broker(ctx: RequestContext, name: str) -> list[DescribedConfig]:
    layers = broker_layers(ctx)
    return describe_broker_configs(_with_listener_overrides(layers), layers, per_broker=name != "")


def _with_listener_overrides(layers: BrokerConfigLayers) -> dict[str, BrokerConfigDefinition]:
    """The definitions plus one for each listener-prefixed config set at some level.

    As Kafka describes ``listener.name.<listener>.<config>``: with its config's type (so a
    password stays hidden) and read-only, since the prefixed name itself is not among
    Kafka's dynamic config names.
    """
    definitions = dict(BROKER_CONFIG_DEFINITIONS)
    for level in (layers.dynamic_broker, layers.dynamic_default, layers.static):
        for name in level:
            base = BROKER_CONFIG_DEFINITIONS.get(base_config_name(name))
            if name not in definitions and base is not None:
                definitions[name] = replace(base, dynamic=False)
    return definitions


def _check_authorized(
    ctx: RequestContext, resource_type: int, name: str, operation: AclOperation
) -> None:
    """Raise the resource's authorization error unless ``operation`` is allowed on it."""
    if resource_type == TOPIC:
        if not authorize(ctx, operation, ResourceType.TOPIC, name):
            raise KafkaError("Topic authorization failed.", ErrorCode.topic_authorization_failed)
    elif resource_type in (BROKER, BROKER_LOGGER) and not authorize(
        ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        raise KafkaError("Cluster authorization failed.", ErrorCode.cluster_authorization_failed)


# -- DescribeConfigs -----------------------------------------------------------------------


def _describe_resource(ctx: RequestContext, resource_type: int, name: str) -> list[DescribedConfig]:
    if resource_type == TOPIC:
        return describe_topic(ctx, _require_topic(ctx, name))
    if resource_type == BROKER:
        _check_broker_name(ctx, name)
        return describe_broker(ctx, name)
    raise InvalidRequest(f"Unsupported resource type {resource_type}")


async def handle_describe_configs(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_CONFIGS, ctx.api_version)
    results = []
    for resource in request.resources:
        configs: tuple = ()
        error, message = ErrorCode.none, None
        try:
            _check_authorized(
                ctx, resource.resource_type, resource.resource_name, AclOperation.DESCRIBE_CONFIGS
            )
            described = _describe_resource(ctx, resource.resource_type, resource.resource_name)
            keys = resource.configuration_keys
            if keys is not None:
                described = [c for c in described if c.name in keys]
            configs = tuple(
                _describe_entry(
                    module,
                    c,
                    request.include_synonyms,
                    getattr(request, "include_documentation", False),
                )
                for c in described
            )
        except KafkaError as exc:
            error, message = exc.error_code, str(exc)
        results.append(
            schemas.build(
                module.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return schemas.build(module.DescribeConfigsResponse, throttle_time=0, results=tuple(results))


def _describe_entry(
    module, c: DescribedConfig, include_synonyms: bool, include_documentation: bool
) -> object:
    synonyms = tuple(
        schemas.build(
            module.DescribeConfigsSynonym,
            name=s.name,
            value=None if c.is_sensitive else s.value,
            source=int(s.source),
        )
        for s in (c.synonyms if include_synonyms else ())
    )
    return schemas.build(
        module.DescribeConfigsResourceResult,
        name=c.name,
        value=c.value,
        read_only=c.read_only,
        config_source=int(c.source),
        is_sensitive=c.is_sensitive,
        synonyms=synonyms,
        config_type=int(c.config_type),
        documentation=c.documentation if include_documentation else None,
    )


# -- AlterConfigs / IncrementalAlterConfigs -------------------------------------------------


def _alter_results(ctx: RequestContext, api_key: ApiKey, request, compute) -> object:
    """Apply ``compute(current overrides, resource) -> new overrides`` to each resource."""
    module = schemas.response_module(api_key, ctx.api_version)
    responses = []
    seen: set[tuple[int, str]] = set()
    for resource in request.resources:
        error, message = ErrorCode.none, None
        key = (resource.resource_type, resource.resource_name)
        try:
            if key in seen:
                raise InvalidRequest(f"Duplicate resource {resource.resource_name} in request")
            seen.add(key)
            _check_authorized(
                ctx, resource.resource_type, resource.resource_name, AclOperation.ALTER_CONFIGS
            )
            _alter_one(ctx, resource, compute, request.validate_only)
        except KafkaError as exc:
            error, message = exc.error_code, str(exc)
        responses.append(
            schemas.build(
                module.AlterConfigsResourceResponse,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return schemas.build(
        getattr(module, _RESPONSE_CLASS[api_key]), throttle_time=0, responses=tuple(responses)
    )


_RESPONSE_CLASS = {
    ApiKey.ALTER_CONFIGS: "AlterConfigsResponse",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigsResponse",
}


def _alter_one(ctx: RequestContext, resource, compute, validate_only: bool) -> None:
    if resource.resource_type == TOPIC:
        topic = _require_topic(ctx, resource.resource_name)
        new = compute(topic.configs, resource, _topic_list_defaults(ctx))
        _set_topic_overrides(ctx, topic.name, new, validate_only)
    elif resource.resource_type == BROKER:
        _check_broker_name(ctx, resource.resource_name)
        current = ctx.broker.metadata.broker_configs(resource.resource_name)
        new = compute(current, resource, _broker_list_defaults(ctx))
        _set_broker_configs(ctx, resource.resource_name, new, validate_only)
    else:
        raise InvalidRequest(f"Unsupported resource type {resource.resource_type}")


def _list_config_names() -> frozenset[str]:
    return frozenset(
        name for name, kind, *_ in LogConfig.definitions() if config_type(kind) == ConfigType.LIST
    )


_BROKER_LIST_CONFIGS = frozenset(
    n for n, d in CONFIG_DEFS.items() if d.type == "list" and n in DYNAMIC_BROKER_CONFIGS
)


def _broker_list_defaults(ctx: RequestContext) -> dict[str, str | None]:
    """What APPEND/SUBTRACT start from on a broker list config that the resource does not set: its value."""
    return {
        c.name: c.value
        for c in describe_broker(ctx, str(ctx.broker.node_id))
        if c.name in _BROKER_LIST_CONFIGS
    }


def _topic_list_defaults(ctx: RequestContext) -> dict[str, str | None]:
    """What APPEND/SUBTRACT start from when a list config has no override: its broker default."""
    defaults = describe_topic_configs(LogConfig.definitions(), {}, broker_layers(ctx))
    list_names = _list_config_names()
    return {c.name: c.value for c in defaults if c.name in list_names}


def _replace_all(current: Mapping[str, str], resource, _defaults) -> dict[str, str]:
    """Legacy AlterConfigs: the request's configs become the whole set of overrides."""
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        raise InvalidRequest("Error due to duplicate config keys")
    return {c.name: c.value for c in resource.configs}


def _incremental(
    current: Mapping[str, str], resource, defaults: Mapping[str, str | None]
) -> dict[str, str]:
    list_names = _list_config_names() if resource.resource_type == TOPIC else _BROKER_LIST_CONFIGS
    ops: Iterable = ((c.name, c.config_operation, c.value) for c in resource.configs)
    return apply_incremental(current, ops, list_names, defaults)


async def handle_alter_configs(ctx: RequestContext, request) -> object:
    return _alter_results(ctx, ApiKey.ALTER_CONFIGS, request, _replace_all)


async def handle_incremental_alter_configs(ctx: RequestContext, request) -> object:
    return _alter_results(ctx, ApiKey.INCREMENTAL_ALTER_CONFIGS, request, _incremental)


class DynamicBrokerConfigs:
    """Broker component (see server/components.py): applies dynamic broker configs.

    The Broker builds its default LogConfig from the static config; the log.* values
    an operator changed through AlterConfigs are kept in the MetadataStore and must
    win again after a restart, before the listeners accept clients. In a cluster
    they may also change through another broker: the store tells this component,
    which applies them again.
    """

    def __init__(self, broker) -> None:
        self.broker = broker

    async def start(self) -> None:
        dynamic = dynamic_broker_configs(self.broker.metadata, self.broker.node_id)
        if dynamic:
            self.broker.replica_manager.update_default_config(
                default_log_config(self.broker.config, dynamic)
            )
        self.broker.metadata.broker_config_listeners.append(self._reapply)

    def _reapply(self) -> None:
        dynamic = dynamic_broker_configs(self.broker.metadata, self.broker.node_id)
        try:
            default = default_log_config(self.broker.config, dynamic)
        except (ConfigError, ValueError):
            log.exception("dynamic broker configs %s not applied", dynamic)
            return
        self.broker.replica_manager.update_default_config(default)

    async def stop(self) -> None:
        pass
