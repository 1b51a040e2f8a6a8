"""Kafka's JAAS config syntax as sasl.jaas.config takes it."""

from __future__ import annotations

import pytest

from odradek.network.jaas_config import (
    JaasConfigError,
    LoginModuleEntry,
    parse_jaas_config,
    parse_single_module,
)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_kafka_documented_plain_entry() -> None:
    text = (
        f"{PLAIN} required \\\n"  # properties files continue lines; the value keeps no newline
        '    username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";'
    ).replace("\\\n", "")
    assert parse_single_module(text, "sasl.jaas.config") == LoginModuleEntry(
        PLAIN,
        "required",
        {
            "username": "admin",
            "password": "admin-secret",
            "user_admin": "admin-secret",
            "user_alice": "alice-secret",
        },
    )


def test_quotes_escapes_words_and_comments() -> None:
    text = (
        "/* a comment */ com.example.Module OPTIONAL // to the end of the line\n"
        "  plain=word-with.dots_and$ "
        r'quoted="a \"quoted\" \\ value; with = signs" '
        "single='in single quotes' empty=\"\" ;"
    )
    (entry,) = parse_jaas_config(text)
    assert entry.flag == "optional"
    assert entry.options == {
        "plain": "word-with.dots_and$",
        "quoted": 'a "quoted" \\ value; with = signs',
        "single": "in single quotes",
        "empty": "",
    }


def test_several_modules_parse_but_sasl_jaas_config_takes_one() -> None:
    text = f"{PLAIN} required a=1; com.example.Other sufficient;"
    assert [e.login_module for e in parse_jaas_config(text)] == [PLAIN, "com.example.Other"]
    with pytest.raises(JaasConfigError, match="contains 2 login modules, should be 1 module"):
        parse_single_module(text, "sasl.jaas.config")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f'{PLAIN} required user_a="x"', "Expected ';'"),
        (f"{PLAIN} mandatory;", "Invalid control flag 'mandatory'"),
        (f'{PLAIN} required user_a="x;', "unterminated quoted value"),
        (f"{PLAIN} required user_a x;", "Expected '=' after option user_a"),
        (f"{PLAIN} required user_a=;", "Expected a value for option user_a"),
        ('"quoted.Module" required;', "Expected a login module class name"),
        ("/* never closed", "unterminated /\\* comment"),
        ("", "contains 0 login modules"),
    ],
)
def test_malformed(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_single_module(text, "sasl.jaas.config")
