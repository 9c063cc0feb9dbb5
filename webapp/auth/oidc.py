"""Sign-in through an OpenID Connect provider: discovery, the authorization request, the code exchange, the ID token.

Decisions (issue 40):
- The authorization code flow with PKCE (S256), a state and a nonce, through Authlib: its httpx
  OAuth2Client makes the authorization URL and exchanges the code; the ID token is checked the way
  Authlib's own integrations do it (joserfc's `jwt.decode` against the provider's JWKS, then
  `CodeIDToken(...).validate()`), with the issuer and the audience made essential: signature, `iss`,
  `aud` (and `azp`), `exp`, `iat`, `nonce` and `at_hash`.
- Where a sign-in waits between the redirect and the callback: in two halves that only work together.
  The browser holds the PKCE code verifier in the cookie `dd_oidc` (HttpOnly, SameSite=Lax so the
  provider's redirect back brings it, Secure like every cookie, path /login/oidc, ten minutes); the
  database holds a row (oidc_login_request) with the SHA-256 of the state and of that verifier, where
  to go afterwards, when it expires and when it was used. The nonce is HMAC(secret key, verifier), so
  it is stored nowhere. Not the app's server-side sessions: a session row exists only for a signed-in
  user. Not a cookie alone: a cookie cannot be made single-use, and a callback URL visited twice must
  be refused by us, not only by the provider. Not a row alone: the answer would not be bound to the
  browser that asked (login CSRF: an attacker's own code and state pasted into someone's browser).
- Discovery is read when the first sign-in starts, not at start-up (the server starts while the
  provider is down, and says so when someone clicks), kept an hour; the keys are fetched again once
  when a token names a key id they lack (the provider rotated its keys).
- Clocks may differ by up to a minute (LEEWAY_SECONDS) between the provider and this server.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast
from urllib.parse import urlsplit

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.httpx_client import OAuth2Client
from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import ClaimError, ExpiredTokenError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet, KeySetSerialization
from joserfc.jws import JWSRegistry

from webapp.auth.models import ROLES
from webapp.core.config import ConfigError, Settings

CALLBACK_PATH = "/login/oidc/callback"
LEEWAY_SECONDS = 60
METADATA_SECONDS = 3600
HTTP_TIMEOUT_SECONDS = 10.0

# A JSON object as the provider sends it (discovery, keys, ID token claims): read through isinstance checks.
JsonObject = Mapping[str, object]

RefusalReason = Literal[
    "missing_state", "unknown_state", "replayed", "expired_request", "other_browser", "provider_error",
    "unreachable", "token_exchange", "bad_token", "expired_token", "wrong_audience", "wrong_issuer",
    "wrong_nonce", "email_taken", "no_email", "inactive",
]  # fmt: skip


class OidcRefused(Exception):
    """A sign-in through the provider that is refused: `reason` for the log line, `message` for the person."""

    def __init__(self, reason: RefusalReason, message: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail or message}")
        self.reason = reason
        self.message = message
        self.detail = detail


def parse_role_map(text: str) -> dict[str, frozenset[str]]:
    """Parse DRAFTDESK_OIDC_ROLE_MAP (`value=role,...`) into claim value -> roles; ConfigError names a bad pair."""
    mapping: dict[str, set[str]] = {}
    for number, pair in enumerate((p.strip() for p in text.split(",")), start=1):
        if not pair:
            continue
        value, sep, role = (part.strip() for part in pair.partition("="))
        if not sep or not value or role not in ROLES:
            raise ConfigError(
                f"DRAFTDESK_OIDC_ROLE_MAP, pair {number} ({pair!r}): write value=role with a role among {', '.join(ROLES)}"
            )
        mapping.setdefault(value, set()).add(role)
    return {value: frozenset(roles) for value, roles in mapping.items()}


@dataclass(frozen=True)
class OidcConfig:
    """The provider Draft Desk signs people in through (DRAFTDESK_OIDC_*)."""

    issuer: str
    client_id: str
    client_secret: str = field(repr=False)
    scopes: str
    roles_claim: str
    role_map: dict[str, frozenset[str]]
    provider_name: str
    redirect_uri: str

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcConfig | None:
        """Return the configured provider, or None when sign-in through one is not configured."""
        if not settings.oidc_enabled:
            return None
        return cls(
            issuer=settings.oidc_issuer,
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            scopes=settings.oidc_scopes,
            roles_claim=settings.oidc_roles_claim,
            role_map=parse_role_map(settings.oidc_role_map),
            provider_name=settings.oidc_provider_name or urlsplit(settings.oidc_issuer).hostname or settings.oidc_issuer,
            # registered at the provider as is: from the configured address, never from a request's Host header
            redirect_uri=settings.base_url.rstrip("/") + CALLBACK_PATH,
        )

    def roles_from_claims(self, claims: JsonObject) -> frozenset[str]:
        """Return the roles the configured claim gives (none when no claim is configured or it holds no mapped value)."""
        if not self.roles_claim:
            return frozenset()
        values = claims.get(self.roles_claim)
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list):
            return frozenset()
        return frozenset(role for value in values if isinstance(value, str) for role in self.role_map.get(value, ()))


def sha256_hex(value: str) -> str:
    """Return the hex SHA-256 of a random value (a state, a verifier)."""
    return hashlib.sha256(value.encode()).hexdigest()


def nonce_for(secret_key: str, verifier: str) -> str:
    """Return the nonce of a sign-in: derived from its verifier, so it needs no storing."""
    return hmac.new(secret_key.encode(), f"oidc-nonce\x00{verifier}".encode(), hashlib.sha256).hexdigest()


def validate_id_token(
    *, id_token: str, jwks: JsonObject, config: OidcConfig, nonce: str, access_token: str | None,
    now: dt.datetime, algorithms: list[str] | None = None,
) -> JsonObject:
    """Check an ID token's signature and claims (Authlib's CodeIDToken); return its claims or raise OidcRefused.

    InvalidKeyIdError passes through: the caller fetches the provider's keys again and retries once.
    """
    try:
        keys = KeySet.import_key_set(cast("KeySetSerialization", jwks))  # a JWKS document: {"keys": [...]}
        token = jwt.decode(id_token, key=keys, registry=JWSRegistry(algorithms=algorithms, strict_check_header=False))
    except InvalidKeyIdError:
        raise
    except (JoseError, ValueError) as exc:
        raise OidcRefused("bad_token", "The identity provider's answer could not be verified.", f"ID token: {exc}") from exc
    options = {"iss": {"essential": True, "value": config.issuer}, "aud": {"essential": True, "value": config.client_id}}
    params = {"nonce": nonce, "client_id": config.client_id, **({"access_token": access_token} if access_token else {})}
    claims = CodeIDToken(token.claims, token.header, options, params)
    try:
        claims.validate(now=int(now.timestamp()), leeway=LEEWAY_SECONDS)
    except ExpiredTokenError as exc:
        raise OidcRefused("expired_token", "The identity provider's answer has expired. Sign in again.", f"ID token expired (exp {claims.get('exp')})") from exc
    except ClaimError as exc:
        raise _claim_refusal(exc.claim, claims) from exc
    return dict(claims)


def _claim_refusal(claim: str, claims: JsonObject) -> OidcRefused:
    """Name the refused claim: another issuer, another audience, another nonce, or a malformed token."""
    if claim == "iss":
        return OidcRefused("wrong_issuer", "The answer came from another identity provider than the one configured.", f"ID token iss {claims.get('iss')!r}")
    if claim in ("aud", "azp"):
        return OidcRefused("wrong_audience", "The identity provider's answer was meant for another application.", f"ID token aud {claims.get('aud')!r}")
    if claim == "nonce":
        return OidcRefused("wrong_nonce", "The identity provider's answer does not belong to this sign-in.", "ID token nonce does not match")
    return OidcRefused("bad_token", "The identity provider's answer could not be verified.", f"ID token claim {claim!r} is missing or invalid")


@dataclass(frozen=True)
class ProviderMetadata:
    """What Draft Desk reads of the provider's discovery document."""

    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: list[str] | None  # id_token_signing_alg_values_supported

    @classmethod
    def parse(cls, document: JsonObject, *, provider_name: str) -> ProviderMetadata:
        """Read the endpoints and algorithms; refuse a document that lacks one."""
        names = ("authorization_endpoint", "token_endpoint", "jwks_uri")
        values = [document.get(k) for k in names]
        missing = [k for k, v in zip(names, values, strict=True) if not isinstance(v, str)]
        if missing:
            raise OidcRefused("unreachable", f"{provider_name}'s configuration is incomplete.", f"discovery lacks {', '.join(missing)}")
        algs = document.get("id_token_signing_alg_values_supported")
        algorithms = [a for a in algs if isinstance(a, str)] if isinstance(algs, list) else None
        return cls(*(str(v) for v in values), algorithms=algorithms)


@dataclass(frozen=True)
class TokenSet:
    """The token endpoint's answer, as far as signing in needs it."""

    id_token: str
    access_token: str | None


class OidcClient:
    """Talks to the provider: its metadata and keys (fetched on first use and kept), the authorization URL, the code exchange."""

    def __init__(self, config: OidcConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._metadata: ProviderMetadata | None = None
        self._metadata_at = 0.0
        self._jwks: JsonObject | None = None

    def _oauth(self) -> OAuth2Client:
        return OAuth2Client(
            client_id=self.config.client_id,
            client_secret=self.config.client_secret,
            scope=self.config.scopes,
            redirect_uri=self.config.redirect_uri,
            code_challenge_method="S256",
            timeout=HTTP_TIMEOUT_SECONDS,
        )

    def _get_json(self, url: str) -> JsonObject:
        try:
            response = httpx.get(url, timeout=HTTP_TIMEOUT_SECONDS, follow_redirects=False)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise OidcRefused("unreachable", f"{self.config.provider_name} could not be reached. Try again in a moment.", f"GET {url}: {exc}") from exc
        if not isinstance(body, dict):
            raise OidcRefused("unreachable", f"{self.config.provider_name} answered with something unexpected.", f"GET {url}: not a JSON object")
        return body

    def metadata(self) -> ProviderMetadata:
        """Return the provider's discovery document (kept an hour); its issuer must be the configured one."""
        with self._lock:
            if self._metadata is not None and time.monotonic() - self._metadata_at < METADATA_SECONDS:
                return self._metadata
        document = self._get_json(self.config.issuer.rstrip("/") + "/.well-known/openid-configuration")
        if document.get("issuer") != self.config.issuer:
            # OpenID Connect Discovery 4.3: the document must name exactly the issuer it was fetched for
            raise OidcRefused("wrong_issuer", "The identity provider's configuration names another issuer.", f"discovery issuer {document.get('issuer')!r}")
        metadata = ProviderMetadata.parse(document, provider_name=self.config.provider_name)
        with self._lock:
            self._metadata, self._metadata_at = metadata, time.monotonic()
        return metadata

    def jwks(self, *, force: bool = False) -> JsonObject:
        """Return the provider's signing keys (fetched again when `force`)."""
        if self._jwks is None or force:
            self._jwks = self._get_json(self.metadata().jwks_uri)
        return self._jwks

    def authorization_url(self, *, state: str, nonce: str, verifier: str) -> str:
        """Return the URL that sends the browser to the provider (code flow, PKCE S256, state, nonce)."""
        endpoint = self.metadata().authorization_endpoint
        url, _ = self._oauth().create_authorization_url(endpoint, state=state, code_verifier=verifier, nonce=nonce)
        return url

    def exchange(self, *, code: str, verifier: str) -> TokenSet:
        """Exchange an authorization code (with its PKCE verifier) for the provider's tokens."""
        endpoint = self.metadata().token_endpoint
        client = self._oauth()
        try:
            token = client.fetch_token(endpoint, code=code, code_verifier=verifier)
        except httpx.TransportError as exc:
            raise OidcRefused("unreachable", f"{self.config.provider_name} could not be reached. Try again in a moment.", f"token endpoint: {exc}") from exc
        except (AuthlibBaseError, httpx.HTTPStatusError, ValueError) as exc:
            raise OidcRefused("token_exchange", f"{self.config.provider_name} refused this sign-in. Start again from the login page.", f"token endpoint: {exc}") from exc
        finally:
            cast(httpx.Client, client).close()  # an httpx.Client (the bundled Authlib stubs do not say so)
        id_token, access_token = token.get("id_token"), token.get("access_token")
        if not isinstance(id_token, str):
            raise OidcRefused("bad_token", "The identity provider sent no ID token.", "token response has no id_token")
        return TokenSet(id_token=id_token, access_token=access_token if isinstance(access_token, str) else None)

    def claims(self, *, token: TokenSet, nonce: str, now: dt.datetime) -> JsonObject:
        """Validate the ID token of a token response against the provider's keys; return its claims."""
        algorithms = self.metadata().algorithms

        def check(jwks: JsonObject) -> JsonObject:
            return validate_id_token(
                id_token=token.id_token, jwks=jwks, config=self.config, nonce=nonce,
                access_token=token.access_token, now=now, algorithms=algorithms,
            )  # fmt: skip

        try:
            return check(self.jwks())
        except InvalidKeyIdError:
            try:
                return check(self.jwks(force=True))
            except InvalidKeyIdError as exc:
                raise OidcRefused("bad_token", "The identity provider's answer could not be verified.", "ID token signed by an unknown key") from exc
