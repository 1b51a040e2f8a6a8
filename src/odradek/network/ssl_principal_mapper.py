"""``ssl.principal.mapping.rules``: a client certificate's subject -> the principal's name.

A sans-I/O copy of the behaviour of Kafka's SslPrincipalMapper, so that rules
written for a Kafka broker map the same subjects to the same names here:

- The value is a comma-separated list; each entry is ``DEFAULT`` (the subject
  unchanged) or ``RULE:pattern/replacement/`` with an optional ``L`` or ``U``
  after the last slash (lower- or upper-case the result, English rules). A
  comma inside a rule is part of it when it sits inside the pattern or the
  replacement (``\\,`` escapes a slash or comma there). Empty entries are
  ignored; anything else is an invalid rule, refused when the config is read.
- The first rule whose pattern matches the whole subject gives the name: every
  match of the pattern in the subject is replaced by the replacement (Java's
  ``replaceAll``), in which ``$n`` names a group. A reference to a group the
  pattern does not have is literal text, as Kafka escapes it; a subject no rule
  matches has no principal, and its connection is refused.
- The subject is the RFC 2253 string Java's ``X500Principal.getName()`` gives,
  built by ``distinguished_name``.

Patterns are compiled by Python's ``re``, which reads the regular expressions
such rules use (groups, classes, lazy and possessive quantifiers, anchors) as
Java does; a pattern ``re`` cannot compile is a config error naming the rule.
The replacement is expanded here by Java's rules rather than ``re``'s (``$1``,
not ``\\1``; ``\\x`` is a literal ``x``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Kafka's BrokerSecurityConfigs.DEFAULT_SSL_PRINCIPAL_MAPPING_RULES.
DEFAULT_RULES = "DEFAULT"

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class InvalidRule(ValueError):
    """An entry of ssl.principal.mapping.rules that is not a rule."""


class NoMatchingRule(ValueError):
    """No rule maps this subject (the connection has no principal and is closed)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        groups = self.pattern.groups
        template = _escape_literal_back_references(self.replacement, groups)
        result = self.pattern.sub(lambda m: _expand(template, m), subject)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (
            f"/{self.case}" if self.case else ""
        )


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """As Kafka: ``$n`` beyond the pattern's groups is literal text (``$12`` with one group is
    group 1 then "2"), so a rule never fails on a subject because of its replacement."""
    if groups == 0:
        return replacement
    value = replacement
    for match in reversed(list(_BACK_REFERENCE.finditer(replacement))):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            value = value[: match.start()] + "\\" + value[match.start() :]
    return value


def _expand(template: str, match: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: ``\\x`` is x, ``$n`` the longest group number that exists."""
    out: list[str] = []
    i, groups = 0, match.re.groups
    while i < len(template):
        c = template[i]
        if c == "\\" and i + 1 < len(template):
            out.append(template[i + 1])
            i += 2
        elif c == "$":
            j = i + 1
            if j >= len(template) or not template[j].isdigit():
                raise NoMatchingRule(f"illegal group reference in replacement {template!r}")
            number = int(template[j])
            j += 1
            while j < len(template) and template[j].isdigit():
                longer = number * 10 + int(template[j])
                if longer > groups:
                    break
                number, j = longer, j + 1
            if number > groups:
                raise NoMatchingRule(f"no group {number} in replacement {template!r}")
            out.append(match.group(number) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Parsed rules; ``name(subject)`` maps one certificate subject."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        parsed = [_parse(entry) for entry in _split(DEFAULT_RULES if rules is None else rules)]
        self.rules = [r for r in parsed if r is not None]

    def name(self, subject: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(subject)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {subject}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip())]


def _parse(entry: str) -> _Rule | None:
    match = _PARSER.match(entry)
    if match is None:
        raise InvalidRule(f"Invalid rule: {entry}")
    if match.end() != len(entry):
        raise InvalidRule(f"Invalid rule: `{entry}`, unmatched substring: `{entry[match.end() :]}`")
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None  # an empty entry
    try:
        pattern = re.compile(match.group(2))
    except re.error as e:
        raise InvalidRule(f"Invalid rule: `{entry}`: {e}") from None
    return _Rule(pattern, match.group(4), match.group(6))
