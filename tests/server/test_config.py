"""Broker config parsing: Kafka names and defaults, bad values named, log.* synonyms."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.network.client_security import ClientSecurity, SaslClientLogin
from odradek.server.config import BrokerConfig, ConfigError, Endpoint, read_properties


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig({})
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588
    assert config["socket.request.max.bytes"] == 104857600
    assert config["auto.create.topics.enable"] is True
    assert config.log_dirs == ["/tmp/kafka-logs"]
    assert config.node_id is None
    props = config.log_config_properties()
    assert props["retention.ms"] == str(168 * 3600 * 1000)
    assert props["max.message.bytes"] == "1048588"
    assert props["segment.bytes"] == "1073741824"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "zero"),
        ("num.partitions", "0"),
        ("auto.create.topics.enable", "yes"),
        ("listeners", "localhost:9092"),
        ("listeners", "PLAINTEXT://h:99999"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig({key: value})


def test_retention_precedence_and_synonyms() -> None:
    config = BrokerConfig(
        {
            "log.retention.minutes": "5",
            "log.retention.hours": "1",
            "log.segment.bytes": "1024",
            "message.max.bytes": "2000",
            "log.dirs": "/a,/b",
        }
    )
    props = config.log_config_properties()
    assert props["retention.ms"] == "300000"
    assert props["segment.bytes"] == "1024"
    assert props["max.message.bytes"] == "2000"
    assert config.log_dirs == ["/a", "/b"]
    assert (
        BrokerConfig(
            {"log.retention.ms": "-1", "log.retention.hours": "1"}
        ).log_config_properties()["retention.ms"]
        == "-1"
    )


def test_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# broker\nnode.id=3\nlisteners = PLAINTEXT://0.0.0.0:9093\n! comment\nlog.dirs:/data\n"
    )
    config = BrokerConfig(read_properties(path))
    assert config.node_id == 3
    assert config.listeners() == [Endpoint("PLAINTEXT", "0.0.0.0", 9093, "PLAINTEXT")]
    assert config.log_dirs == ["/data"]
    assert config.advertised_listeners({"PLAINTEXT": 9093}) == {"PLAINTEXT": ("127.0.0.1", 9093)}


def test_advertised_listeners() -> None:
    config = BrokerConfig(
        {"listeners": "PLAINTEXT://:0", "advertised.listeners": "PLAINTEXT://kafka.example:19092"}
    )
    assert config.advertised_listeners({"PLAINTEXT": 40000}) == {
        "PLAINTEXT": ("kafka.example", 19092)
    }
    local = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert local.advertised_listeners({"PLAINTEXT": 40000}) == {"PLAINTEXT": ("127.0.0.1", 40000)}
    with pytest.raises(ConfigError, match="listeners"):
        BrokerConfig({"advertised.listeners": "nonsense"})


def test_flush_ms_falls_back_to_the_scheduler_interval() -> None:
    """Kafka's synonym order for flush.ms: log.flush.interval.ms, else log.flush.scheduler.interval.ms."""
    assert (
        BrokerConfig({"log.flush.scheduler.interval.ms": "3000"}).log_config_properties()[
            "flush.ms"
        ]
        == "3000"
    )
    both = BrokerConfig({"log.flush.interval.ms": "100", "log.flush.scheduler.interval.ms": "3000"})
    assert both.log_config_properties()["flush.ms"] == "100"


def test_message_timestamp_bounds_are_broker_configs() -> None:
    """log.message.timestamp.before/after.max.ms (KIP-937) with Kafka 4's defaults, passed on to topics."""
    defaults = BrokerConfig({}).log_config_properties()
    assert defaults["message.timestamp.before.max.ms"] == str(2**63 - 1)
    assert defaults["message.timestamp.after.max.ms"] == "3600000"
    config = BrokerConfig(
        {"log.message.timestamp.after.max.ms": "1000", "log.message.timestamp.before.max.ms": "5"}
    )
    assert config["log.message.timestamp.after.max.ms"] == 1000
    props = config.log_config_properties()
    assert (props["message.timestamp.after.max.ms"], props["message.timestamp.before.max.ms"]) == (
        "1000",
        "5",
    )
    with pytest.raises(ConfigError, match="log.message.timestamp.after.max.ms"):
        BrokerConfig({"log.message.timestamp.after.max.ms": "-1"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", str(2**31)),
        ("offsets.topic.replication.factor", "40000"),
        ("log.retention.bytes", str(2**63)),
    ],
)
def test_numbers_must_fit_their_kafka_type(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig({key: value})


def test_several_listeners_matched_by_name() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,internal://0.0.0.0:9094,HIDDEN://:9095",
            "advertised.listeners": "INTERNAL://broker.internal:19094,PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,HIDDEN:PLAINTEXT",
        }
    )
    assert [e.listener_name for e in config.listeners()] == ["PLAINTEXT", "INTERNAL", "HIDDEN"]
    assert config.advertised_listeners({"PLAINTEXT": 4000, "INTERNAL": 9094, "HIDDEN": 9095}) == {
        "INTERNAL": ("broker.internal", 19094),
        "PLAINTEXT": ("127.0.0.1", 4000),
    }


@pytest.mark.parametrize(
    ("props", "message"),
    [
        # The inter-broker listener defaults to PLAINTEXT (security.inter.broker.protocol).
        ({"listeners": "SSL://:9093"}, "inter.broker.listener.name must be a listener name"),
        (
            {
                "listeners": "PLAINTEXT://:9092,X://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,X:SASL_PLAINTEXT",
            },
            "listener X: sasl.enabled.mechanisms GSSAPI cannot be served",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
                "sasl.enabled.mechanisms": "PLAIN",
            },
            "enables SASL mechanism PLAIN but listener.name.sasl_ssl.plain.sasl.jaas.config is "
            "not set",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'user_alice="unterminated;'
                ),
            },
            "Invalid value for configuration listener.name.sasl_plaintext.plain.sasl.jaas.config: "
            "unterminated quoted value",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093",
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
            },
            "login module org.apache.kafka.common.security.scram.ScramLoginModule is not "
            "org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        (
            {"inter.broker.listener.name": "internal"},
            "Listener with name INTERNAL defined in inter.broker.listener.name not found",
        ),
        (
            {"security.inter.broker.protocol": "TLS"},
            "security.inter.broker.protocol: String must be one of: PLAINTEXT, SSL",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,SSL://:9093",
                "advertised.listeners": "PLAINTEXT://h:9092",
                "security.inter.broker.protocol": "SSL",
            },
            "must be a listener name defined in advertised.listeners. The valid options "
            "based on currently configured listeners are PLAINTEXT",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,SSL://:9093",
                "listener.name.ssl.ssl.client.auth": "x",
            },
            "listener.name.ssl.ssl.client.auth: String must be one of: required, requested, none",
        ),
        (
            {"listeners": "PLAINTEXT://:9092,OTHER://:9093"},
            "no security protocol defined for listener OTHER",
        ),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "different name"),
        (
            {
                "listeners": "PLAINTEXT://:9092,SSL://:9092",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:PLAINTEXT",
            },
            "different port",
        ),
        ({"advertised.listeners": "SSL://h:9093"}, "subset"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ],
)
def test_listener_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.cleaner.io.buffer.load.factor", "0"),
        ("log.cleaner.io.buffer.load.factor", "1.5"),
        ("log.cleaner.io.buffer.load.factor", "most"),
        ("log.cleaner.dedupe.buffer.size", "1000"),
        ("log.cleaner.io.buffer.size", "-1"),
        ("log.cleaner.enable", "sometimes"),
    ],
)
def test_bad_cleaner_settings_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig({key: value})


def test_cleaner_settings_parse() -> None:
    config = BrokerConfig(
        {"log.cleaner.io.buffer.load.factor": "0.5", "log.cleaner.enable": "false"}
    )
    assert config["log.cleaner.io.buffer.load.factor"] == 0.5
    assert config["log.cleaner.enable"] is False
    assert config["log.cleaner.dedupe.buffer.size"] == 128 * 1024 * 1024
    assert config["log.cleaner.io.buffer.size"] == 512 * 1024


def test_broker_compression_settings_are_topic_defaults() -> None:
    from odradek.storage import LogConfig

    props = BrokerConfig(
        {"compression.type": "zstd", "compression.zstd.level": "7"}
    ).log_config_properties()
    config = LogConfig.from_properties(props)
    assert (config.compression_type, config.compression_zstd_level) == ("zstd", 7)
    assert (config.compression_gzip_level, config.compression_lz4_level) == (-1, 9)


def test_a_bad_broker_compression_type_names_the_key() -> None:
    from odradek.storage import LogConfig

    with pytest.raises(ValueError, match="compression.type"):
        LogConfig.from_properties(
            BrokerConfig({"compression.type": "brotli"}).log_config_properties()
        )


def test_queued_max_request_bytes_is_finite_and_holds_the_largest_request() -> None:
    assert BrokerConfig({})["queued.max.request.bytes"] == 256 * 1024 * 1024
    assert BrokerConfig({"queued.max.request.bytes": "-1"})["queued.max.request.bytes"] == -1
    config = BrokerConfig({"socket.request.max.bytes": "1000", "queued.max.request.bytes": "1000"})
    assert config["queued.max.request.bytes"] == 1000


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"queued.max.request.bytes": "1000"}, "larger or equal to socket.request.max.bytes"),
        ({"socket.request.max.bytes": str(300 * 2**20)}, "queued.max.request.bytes"),
        ({"queued.max.request.bytes": "lots"}, "queued.max.request.bytes"),
    ],
)
def test_queued_max_request_bytes_errors(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


def test_group_coordinator_configs_are_broker_configs() -> None:
    """The coordinator's configs are parsed with the others (a bad one stops start-up naming
    it); the migration policy is case-insensitive, as Kafka's."""
    config = BrokerConfig({"group.max.size": "10", "group.consumer.migration.policy": "Upgrade"})
    assert config["group.max.size"] == 10
    assert config["group.consumer.migration.policy"] == "upgrade"
    assert config["group.consumer.heartbeat.interval.ms"] == 5000
    assert config["offsets.retention.check.interval.ms"] == 600000


def test_the_inter_broker_listener() -> None:
    assert BrokerConfig({}).inter_broker_listener_name == "PLAINTEXT"
    two = {"listeners": "PLAINTEXT://:9092,SSL://:9093"}
    ssl_only = BrokerConfig({**two, "security.inter.broker.protocol": "SSL"})
    assert ssl_only.inter_broker_listener_name == "SSL"
    named = BrokerConfig(
        {
            "listeners": "CLIENTS://:9092,REPLICATION://:9093",
            "listener.security.protocol.map": "CLIENTS:SSL,REPLICATION:PLAINTEXT",
            "inter.broker.listener.name": "replication",
        }
    )
    assert named.inter_broker_listener_name == "REPLICATION"


def test_listener_prefixed_ssl_configs_override_the_broker_wide_ones() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,SSL://:9093,MTLS://:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/etc/broker.pem",
            "ssl.client.auth": "requested",
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.enabled.protocols": "TLSv1.3",
            # Kafka's prefix is the lower-cased listener name: this one configures nothing.
            "listener.name.SSL.ssl.client.auth": "required",
        }
    )
    ssl, mtls = config.ssl_config("SSL"), config.ssl_config("MTLS")
    assert (ssl.client_auth, ssl.enabled_protocols) == ("requested", ("TLSv1.2", "TLSv1.3"))
    assert (mtls.client_auth, mtls.enabled_protocols) == ("required", ("TLSv1.3",))
    assert ssl.keystore_location == mtls.keystore_location == "/etc/broker.pem"
    assert mtls.keystore_type == "PEM"


def test_connections_max_reauth_ms_most_specific_form_wins() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093,OTHER://:9094",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "connections.max.reauth.ms": "60000",
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "30000",
            "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "10000",
        }
    )
    assert config.max_reauth_ms("SASL_PLAINTEXT", "SCRAM-SHA-512") == 10000
    assert config.max_reauth_ms("SASL_PLAINTEXT", "SCRAM-SHA-256") == 30000
    assert config.max_reauth_ms("OTHER", "SCRAM-SHA-512") == 60000
    assert BrokerConfig({}).max_reauth_ms("PLAINTEXT", "PLAIN") == 0


def test_properties_file_continues_lines_ending_in_a_backslash(tmp_path: Path) -> None:
    """The multi-line JAAS entry of Kafka's documentation (and docs/guide/security.md)."""
    path = tmp_path / "server.properties"
    path.write_text(
        "listeners=PLAINTEXT://:9092,SASL_PLAINTEXT://:9094\n"
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    user_alice="alice-secret" \\\n'
        '    user_admin="admin-secret";\n'
    )
    config = BrokerConfig(read_properties(path))
    assert config.plain_users("SASL_PLAINTEXT") == {
        "alice": "alice-secret",
        "admin": "admin-secret",
    }


_SASL_BROKER = {
    "listeners": "PLAINTEXT://:9092,BROKER://:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:SASL_PLAINTEXT",
    "inter.broker.listener.name": "BROKER",
    "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
    "listener.name.broker.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="pw" user_broker="pw";'
    ),
}
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, r"sasl.mechanism.inter.broker.protocol GSSAPI \(the default\) cannot be used"),
        (
            {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms",
        ),
        (
            {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
            "listener.name.broker.scram-sha-512.sasl.jaas.config is not set",
        ),
        (
            {
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.broker.scram-sha-512.sasl.jaas.config": f'{_SCRAM_LOGIN} username="b";',
            },
            "the SCRAM-SHA-512 login needs the option.s. password",
        ),
        (
            {
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.broker.scram-sha-512.sasl.jaas.config": (
                    'org.apache.kafka.common.security.plain.PlainLoginModule required username="b" '
                    'password="p";'
                ),
            },
            "PlainLoginModule is not org.apache.kafka.common.security.scram.ScramLoginModule",
        ),
    ],
)
def test_a_sasl_inter_broker_listener_needs_a_login_this_broker_has(
    props: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({**_SASL_BROKER, **props})


def test_the_inter_broker_client_security() -> None:
    assert BrokerConfig({}).inter_broker_client_security() == ClientSecurity("PLAINTEXT")
    plain = BrokerConfig({**_SASL_BROKER, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    security = plain.inter_broker_client_security()
    assert security == ClientSecurity(
        "SASL_PLAINTEXT", None, SaslClientLogin("PLAIN", "broker", "pw")
    )
    assert "pw" not in repr(security)
    scram = BrokerConfig(
        {
            **_SASL_BROKER,
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.broker.scram-sha-512.sasl.jaas.config": (
                f'{_SCRAM_LOGIN} username="admin" password="admin-pw";'
            ),
        }
    )
    assert scram.inter_broker_sasl_login() == SaslClientLogin("SCRAM-SHA-512", "admin", "admin-pw")
