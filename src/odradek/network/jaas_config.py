"""Kafka's JAAS config syntax, as ``sasl.jaas.config`` takes it.

``LoginModuleClass flag key=value key="quoted value" ... ;`` where flag is one of
required, requisite, sufficient, optional. Kafka's JaasConfig reads it with Java's
StreamTokenizer, so this parser accepts what that tokenizer does: words of letters,
digits and ``- _ $ .``, values in double or single quotes with backslash escapes,
``//`` and ``/* */`` comments, and whitespace anywhere between tokens. As Kafka, a
``sasl.jaas.config`` value must hold exactly one login module; the broker keeps the
whole entry (module, flag, options) so each SASL mechanism reads the options it
understands (PLAIN's ``user_<name>="password"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: javax.security.auth.login.AppConfigurationEntry.LoginModuleControlFlag names.
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasConfigError(ValueError):
    """The text is not one valid JAAS login module entry."""


@dataclass(frozen=True, slots=True)
class LoginModuleEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in "-_$."


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind is "word", "quoted" or the punctuation character itself."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasConfigError("unterminated /* comment")
            i = end + 2
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            tokens.append(("quoted", value))
        elif _is_word_char(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            tokens.append(("word", text[start:i]))
        else:
            tokens.append((c, c))
            i += 1
    return tokens


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The value of a quoted string starting after its opening quote, and the index after it."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if c == "\n":
            break
        out.append(c)
        i += 1
    raise JaasConfigError(f"unterminated quoted value starting {text[i - 1 : i + 20]!r}")


def parse_jaas_config(text: str) -> list[LoginModuleEntry]:
    """Every login module entry of ``text``, in order (JaasConfigError when malformed)."""
    tokens = _tokens(text)
    entries: list[LoginModuleEntry] = []
    pos = 0

    def take() -> tuple[str, str]:
        nonlocal pos
        if pos >= len(tokens):
            raise JaasConfigError("Expected ';' at the end of the login module entry")
        pos += 1
        return tokens[pos - 1]

    while pos < len(tokens):
        kind, module = take()
        if kind != "word":
            raise JaasConfigError(f"Expected a login module class name, got {module!r}")
        kind, flag = take()
        if kind != "word" or flag.lower() not in CONTROL_FLAGS:
            raise JaasConfigError(
                f"Invalid control flag {flag!r} for login module {module}: expected one of "
                + ", ".join(CONTROL_FLAGS)
            )
        options: dict[str, str] = {}
        while True:
            kind, key = take()
            if kind == ";":
                break
            if kind != "word":
                raise JaasConfigError(f"Expected an option name in {module}, got {key!r}")
            kind, _ = take()
            if kind != "=":
                raise JaasConfigError(f"Expected '=' after option {key} in {module}")
            kind, value = take()
            if kind not in ("word", "quoted"):
                raise JaasConfigError(f"Expected a value for option {key} in {module}")
            options[key] = value
        entries.append(LoginModuleEntry(module, flag.lower(), options))
    return entries


def parse_single_module(text: str, config_name: str) -> LoginModuleEntry:
    """Kafka's rule for a ``sasl.jaas.config`` value: exactly one login module."""
    try:
        entries = parse_jaas_config(text)
    except JaasConfigError as e:
        raise JaasConfigError(f"Invalid value for configuration {config_name}: {e}") from None
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property {config_name} contains {len(entries)} login modules, "
            "should be 1 module"
        )
    return entries[0]
