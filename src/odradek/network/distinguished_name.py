"""A certificate's subject as the RFC 2253 string Java's ``X500Principal.getName()`` gives.

Kafka maps that string through ``ssl.principal.mapping.rules``, so rules written
for Kafka only work here if the string is the same, byte for byte: the relative
distinguished names from the last to the first (``CN=...,OU=...,O=...,C=...``),
the attribute types RFC 2253 names by keyword (CN, C, L, ST, O, OU, STREET, DC,
UID) as keywords and every other one as its dotted OID with the value's DER
encoding in hex (``1.2.840.113549.1.9.1=#1611...`` for an e-mail address),
several values of one RDN joined by ``+``. Values are written as Java writes
them: the string types' bytes read as UTF-8, each of ``, = + < > # ; " \\``
escaped with a backslash (Java escapes ``=`` and ``#`` anywhere, beyond RFC
2253's minimum), NUL as ``\\00``, leading and trailing spaces escaped; a value
of another type as ``#`` and its DER in hex.

Python's ``ssl`` gives the subject only decoded, without the string types and
for some attributes under other names, so the subject is read from the DER
certificate here: a small reader of the few ASN.1 structures on the way
(Certificate, TBSCertificate, Name), no general ASN.1 library.
"""

from __future__ import annotations

#: RFC 2253's keywords, by OID (what X500Principal.RFC2253 writes as a keyword).
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}

_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06
#: The string types Java writes as text (UTF8, Printable, T61, IA5, General, BMP).
_STRING_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')


class MalformedCertificate(ValueError):
    """The peer's certificate could not be read (the TLS library accepted it, so rarely seen)."""


def _tlv(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``offset``."""
    try:
        tag = data[offset]
        length = data[offset + 1]
        start = offset + 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4:
                raise MalformedCertificate("unsupported DER length")
            length = int.from_bytes(data[start : start + count], "big")
            start += count
    except IndexError:
        raise MalformedCertificate("truncated DER element") from None
    end = start + length
    if end > len(data):
        raise MalformedCertificate("truncated DER element")
    return tag, start, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The elements inside a constructed value: (tag, value start, value end, element start)."""
    out = []
    while start < end:
        tag, vstart, vend = _tlv(data, start)
        out.append((tag, vstart, vend, start))
        start = vend
    return out


def _oid(value: bytes) -> str:
    if not value:
        raise MalformedCertificate("empty OID")
    first = value[0]
    arcs = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    n = 0
    for byte in value[1:]:
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(n)
            n = 0
    return ".".join(map(str, arcs))


def _escape(value: str) -> str:
    out = ["\\" + c if c in _ESCAPED else "\\00" if c == "\x00" else c for c in value]
    lead = 0
    while lead < len(value) and value[lead] in " \r":
        out[lead] = "\\" + value[lead]
        lead += 1
    trail = len(value) - 1
    while trail >= lead and value[trail] in " \r":
        out[trail] = "\\" + value[trail]
        trail -= 1
    return "".join(out)


def _attribute(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2 or parts[0][0] != _OID:
        raise MalformedCertificate("bad AttributeTypeAndValue")
    _, ostart, oend, _ = parts[0]
    tag, vstart, vend, element = parts[1]
    oid = _oid(data[ostart:oend])
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{data[element:vend].hex()}"
    return f"{keyword}={_escape(data[vstart:vend].decode('utf-8', errors='replace'))}"


def subject_rfc2253(certificate_der: bytes) -> str:
    """The subject of a DER certificate, formatted as X500Principal.getName() formats it."""
    _, cstart, cend = _tlv(certificate_der, 0)
    parts = _children(certificate_der, cstart, cend)
    if not parts or parts[0][0] != _SEQUENCE:
        raise MalformedCertificate("no TBSCertificate")
    _, tstart, tend, _ = parts[0]
    fields = _children(certificate_der, tstart, tend)
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise MalformedCertificate("no subject")
    _, nstart, nend, _ = fields[4]
    rdns = []
    for tag, rstart, rend, _ in _children(certificate_der, nstart, nend):
        if tag != _SET:
            raise MalformedCertificate("bad RelativeDistinguishedName")
        rdns.append(
            "+".join(
                _attribute(certificate_der, astart, aend)
                for _, astart, aend, _ in _children(certificate_der, rstart, rend)
            )
        )
    return ",".join(reversed(rdns))
