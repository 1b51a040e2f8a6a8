"""Where OAUTHBEARER's JWT validator finds its keys: a JWKS file or endpoint, as Kafka's.

``sasl.oauthbearer.jwks.endpoint.url`` is a ``file:`` URL (Kafka's
JwksFileVerificationKeyResolver: read once, at start-up) or an ``http(s):`` one (its
RefreshingHttpsJwks: fetched at start-up, then again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms``, retried with a backoff from
``...retry.backoff.ms`` doubling up to ``...retry.backoff.max.ms``). A key set that cannot
be loaded at start-up stops the broker with the reason, as Kafka's fails to configure its
callback handler; a failed refresh keeps the keys it has. A token signed by a key id the
set does not hold asks for an early refresh (at most once a minute per key id, as Kafka),
so a provider's rotated key is found without waiting for the next scheduled one; the
token itself is refused, and the client's next login finds the new key.

The fetches run on a daemon thread of their own: a refresh never holds up the event loop,
and the validator reads whichever key set was fetched last (one attribute, swapped whole).
An https endpoint is checked against the JAAS option ``ssl.truststore.location`` (PEM) when
given, as Kafka reads its ``ssl.*`` options for that connection, else the system's CAs.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jwt import PyJWK
from jwt.exceptions import PyJWTError

from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError

log = logging.getLogger(__name__)

#: Kafka's RefreshingHttpsJwks: an unknown key id asks for a refresh at most this often.
MISSING_KEY_ID_REFRESH_INTERVAL_S = 60.0
#: Kafka's limits on the key ids remembered (longer ones are not refreshed for).
MISSING_KEY_ID_MAX_LENGTH = 1000
MISSING_KEY_ID_MAX_ENTRIES = 16
#: A JWKS document larger than this is refused (a provider's holds a few keys).
MAX_JWKS_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One key of the set, and the algorithm its JWK declares (``alg``), if any."""

    jwk: PyJWK
    algorithm: str | None


def parse_jwks(text: str | bytes, source: str) -> list[VerificationKey]:
    """The usable keys of a JWKS document (keys of unsupported types are skipped, as jose4j)."""
    try:
        document = json.loads(text)
    except ValueError as e:
        raise OAuthBearerConfigError(f"{source} is not JSON: {e}") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise OAuthBearerConfigError(f'{source} is not a JSON Web Key Set (no "keys" list)')
    keys = []
    for entry in entries:
        try:
            keys.append(VerificationKey(PyJWK(entry), entry.get("alg")))
        except (PyJWTError, AttributeError, TypeError, ValueError) as e:
            log.info("%s: skipping a key that cannot verify signatures: %s", source, e)
    if not keys:
        raise OAuthBearerConfigError(f"{source} holds no key that can verify signatures")
    return keys


class JwksKeys:
    """The current key set (``current()``); ``missing(kid)`` when a token named another key."""

    def __init__(self, keys: list[VerificationKey]) -> None:
        self._keys = keys

    def current(self) -> list[VerificationKey]:
        return self._keys

    def missing(self, key_id: str) -> None:
        """A token named a key id the set lacks; a file's set is final."""

    def close(self) -> None:
        """Stop refreshing (nothing to stop for a file)."""


def file_jwks(url: str) -> JwksKeys:
    """The key set of a ``file:`` URL, read now."""
    path = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    if not path.is_file():
        raise OAuthBearerConfigError(
            f"The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url contains a file "
            f"({path}) that doesn't exist or is not a file"
        )
    try:
        text = path.read_bytes()
    except OSError as e:
        raise OAuthBearerConfigError(f"cannot read the JWKS file {path}: {e.strerror}") from None
    return JwksKeys(parse_jwks(text, str(path)))


class RefreshingJwks(JwksKeys):
    """An endpoint's key set, fetched now and refreshed on a daemon thread."""

    def __init__(
        self,
        url: str,
        refresh_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._url = url
        self._ssl_context = ssl_context
        self._refresh_s = refresh_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._backoff_max_s = retry_backoff_max_ms / 1000
        try:
            keys = self._fetch()
        except (OSError, OAuthBearerConfigError) as e:
            raise OAuthBearerConfigError(
                f"The OAuth validator configuration encountered an error when initializing the "
                f"VerificationKeyResolver: could not fetch the JWKS from {url}: {e}"
            ) from None
        super().__init__(keys)
        #: Key id -> when a refresh was last asked for it (monotonic seconds).
        self._missing: dict[str, float] = {}
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="jwks-refresh", daemon=True)
        self._thread.start()
        log.info("JWKS from %s: %d keys, refreshed every %d ms", url, len(keys), refresh_ms)

    def missing(self, key_id: str) -> None:
        if len(key_id) > MISSING_KEY_ID_MAX_LENGTH:
            return
        now = time.monotonic()
        last = self._missing.get(key_id)
        if last is not None and now - last < MISSING_KEY_ID_REFRESH_INTERVAL_S:
            return
        self._missing[key_id] = now
        while len(self._missing) > MISSING_KEY_ID_MAX_ENTRIES:
            del self._missing[next(iter(self._missing))]
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            if self._closed:
                return
            self._refresh()

    def _refresh(self) -> None:
        """Fetch until it succeeds (backing off), or give up until the next scheduled refresh."""
        backoff = self._backoff_s
        deadline = time.monotonic() + self._refresh_s
        while not self._closed:
            try:
                self._keys = self._fetch()
                return
            except (OSError, OAuthBearerConfigError) as e:
                if time.monotonic() + backoff >= deadline:
                    log.warning("could not refresh the JWKS from %s: %s", self._url, e)
                    return
                log.info("could not refresh the JWKS from %s (retrying): %s", self._url, e)
            time.sleep(backoff)
            backoff = min(backoff * 2, self._backoff_max_s)

    def _fetch(self) -> list[VerificationKey]:
        request = urllib.request.Request(self._url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(
            request, timeout=FETCH_TIMEOUT_S, context=self._ssl_context
        ) as response:
            body = response.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise OAuthBearerConfigError(f"the JWKS at {self._url} is over {MAX_JWKS_BYTES} bytes")
        return parse_jwks(body, self._url)


def jwks_keys(configs: Mapping[str, Any], jaas_options: Mapping[str, str]) -> JwksKeys:
    """The key set ``sasl.oauthbearer.jwks.endpoint.*`` name (the listener's resolved values)."""
    url = configs["sasl.oauthbearer.jwks.endpoint.url"].strip()
    scheme = urllib.parse.urlparse(url).scheme.lower()
    if scheme == "file":
        return file_jwks(url)
    context = None
    if scheme == "https":
        cafile = jaas_options.get("ssl.truststore.location")
        try:
            context = ssl.create_default_context(cafile=cafile)
        except (OSError, ssl.SSLError) as e:
            raise OAuthBearerConfigError(
                f"the JAAS option ssl.truststore.location ({cafile}) is not a PEM trust store: {e}"
            ) from None
    return RefreshingJwks(
        url,
        configs["sasl.oauthbearer.jwks.endpoint.refresh.ms"],
        configs["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"],
        configs["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"],
        context,
    )
