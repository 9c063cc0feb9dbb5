"""Settings from the environment (prefix DRAFTDESK_) and the loaded eval spec."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from webapp.core.spec import EvalSpec, load_spec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Read-only files the app serves or loads (templates/, static/, data/*.yaml, the npm packages' JS).
# A source checkout (./dev, an editable install) reads them where they are in the repository; an
# installed wheel carries copies in webapp/_bundled, laid out the same way, made by setup.py at build
# time (docs/deployment.md, "Installing"), since site-packages has no repository around the package.
BUNDLED_DIR = Path(__file__).resolve().parents[1] / "_bundled"
INSTALLED = BUNDLED_DIR.is_dir()
ASSET_ROOT = BUNDLED_DIR if INSTALLED else PROJECT_ROOT
# Writable files (the default SQLite database, backups, the demo's database): the repository's data/
# in a checkout; installed, the working directory's data/ (the service's WorkingDirectory), never
# site-packages.
DATA_DIR = Path.cwd().resolve() / "data" if INSTALLED else PROJECT_ROOT / "data"
DEFAULT_SECRET_KEY = "draftdesk-insecure-development-key"


def _https_or_loopback(url: str) -> bool:
    """Tell whether a URL is https, or http to a loopback host (a provider the tests or a developer run)."""
    parsed = urlsplit(url)
    if parsed.scheme == "https":
        return bool(parsed.hostname)
    return parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")


class ConfigError(RuntimeError):
    """Settings that must not be used as they are."""


class Settings(BaseSettings):
    """Runtime configuration; every field can be set as DRAFTDESK_<NAME> in the environment."""

    model_config = SettingsConfigDict(env_prefix="DRAFTDESK_", extra="ignore")

    database_url: str = Field(
        default=f"sqlite:///{DATA_DIR / 'draftdesk.db'}",
        description="SQLite file (the default is in the project's `data/` folder; the demo uses `data/demo.db`), or "
        "`postgresql+psycopg://user@host/db` for a team",
    )
    secret_key: str = Field(
        default=DEFAULT_SECRET_KEY,
        description="signs CSRF tokens and alert webhooks; **refused** at start-up in production mode "
        "when left at its default (a development key)",
    )
    spec: Path = Field(default=ASSET_ROOT / "data" / "eval_spec.yaml", description="the evaluation plan (YAML)")
    mode: Literal["production", "demo", "dev"] = Field(
        default="production",
        description="`production` (the default, and `serve`'s) refuses the default secret key; `demo` (set by "
        "`draftdesk demo`) and `dev` (the default of the other commands and of the tests) accept it",
    )
    secure_cookies: bool | None = Field(
        default=None,
        description="session and CSRF cookies marked `Secure` (sent over HTTPS only). Unset: on in production "
        "mode, off in demo and dev; `0` turns it off, e.g. for a trial over plain HTTP (was "
        "`DRAFTDESK_COOKIE_SECURE`, default off)",
    )
    session_hours: int = Field(default=12, description="hours a sign-in lasts at most")
    session_idle_minutes: int = Field(
        default=60,
        ge=1,
        description="a sign-in ends after this many minutes without a request (the idle timeout). See "
        "[Security](security.md)",
    )
    login_max_failures: int = Field(
        default=5,
        description="failed sign-ins of one email from one address within the window before that address's "
        "sign-in to that email is refused for a while (four times as many from one address to any emails)",
    )
    login_account_max_failures: int = Field(
        default=50,
        ge=1,
        description="failed sign-ins of one email from all addresses within the window before it is refused from "
        "every address that has not signed it in before (the per-account ceiling). See [Security](security.md)",
    )
    login_window_minutes: int = Field(default=15, description="the window (minutes) of the failed sign-in limit")
    evaluator_prices: Path = Field(
        default=ASSET_ROOT / "data" / "model_prices.yaml",
        description="USD per million tokens per model, for the cost the evaluator reports (a missing file: no cost)",
    )
    base_url: str = Field(
        default="http://127.0.0.1:8000",
        description="where people open Draft Desk: the links in alert notifications start with it",
    )
    background_jobs: bool = Field(
        default=False,
        description="run alert evaluation and delivery inside the server; `serve` and `demo` turn it on "
        "(`serve --no-background` leaves it off)",
    )
    separate_jobs: bool = Field(
        default=False,
        description="a `draftdesk jobs` process runs the background jobs (metrics rebuild, alerts, retention): "
        "the server runs none and leaves each events batch's rebuild to it (`serve --separate-jobs`)",
    )
    alerts_interval_seconds: float = Field(
        default=30.0, description="seconds between two background passes of alert evaluation and delivery"
    )
    alerts_allow_private_targets: bool = Field(
        default=False,
        description="let webhook and Slack alert channels post to loopback, private and link-local addresses "
        "(an in-house receiver); off, such targets are refused when saved and at every send. See "
        "[Security](security.md)",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="the reverse proxy's address(es), comma-separated (or `*`): only from them are "
        "`X-Forwarded-For` and `X-Forwarded-Proto` believed, so the sign-in limiter counts each client's own "
        "address. Empty (the default): no proxy is trusted, set it when one runs in front. "
        "See [Deployment](deployment.md)",
    )
    backup_dir: Path = Field(
        default=DATA_DIR / "backups",
        description="where `serve` writes the backup it takes before applying migrations (and `db backup` by default)",
    )
    login_attempt_retention_days: int = Field(
        default=30, ge=1, description="sign-in attempts older than this are pruned (hourly by the server, and by `db prune`)"
    )
    outbox_retention_days: int = Field(
        default=30, ge=1, description="delivered alert messages older than this are pruned; pending and failed ones never"
    )
    fact_retention_days: int = Field(
        default=30, ge=1, description="facts whose reactions are all done are pruned this many days after they were recorded; pending ones never"
    )
    event_retention_days: int = Field(
        default=0,
        ge=0,
        description="production events older than this many days are pruned (except those a review or a "
        "hallucination report cites); 0 keeps them forever",
    )

    ppi_weekly_draft_cap: int = Field(
        default=1000,
        ge=1,
        description="at most this many drafts of one production week go into its weekly quality run (judged by "
        "the judge); a busier week's drafts are drawn uniformly at random, with a stored seed. See [PPI](ppi.md)",
    )

    oidc_issuer: str = Field(
        default="",
        description="the identity provider's issuer URL (OpenID Connect; its `/.well-known/openid-configuration` is "
        "read from it): set, the login page offers \"Sign in with\" it. HTTPS, except on a loopback address. See "
        "[Deployment](deployment.md#signing-in-through-your-identity-provider)",
    )
    oidc_client_id: str = Field(default="", description="the client id Draft Desk is registered under at the identity provider")
    oidc_client_secret: str = Field(
        default="",
        repr=False,
        description="that client's secret: from the environment only (no page shows or takes it)",
    )
    oidc_provider_name: str = Field(
        default="",
        description="the provider's name on the login button (\"Sign in with Okta\"); unset: the issuer's host name",
    )
    oidc_scopes: str = Field(
        default="openid email profile",
        description="the scopes asked for at sign-in (space-separated; add the one that brings the roles claim when "
        "the provider needs one, e.g. `groups`)",
    )
    oidc_roles_claim: str = Field(
        default="",
        description="the ID token claim that lists a person's groups (e.g. `groups`); unset: only an admin grants roles",
    )
    oidc_role_map: str = Field(
        default="",
        description="which claim values give which role, comma-separated `value=role` pairs (e.g. "
        "`dd-pm=pm,dd-admins=admin`); a value may appear twice for two roles",
    )
    password_login: bool = Field(
        default=True,
        description="sign-in with a local password; `0` turns it off (then the login page shows only the identity "
        "provider's button and a password sign-in is refused); needs DRAFTDESK_OIDC_ISSUER",
    )

    @model_validator(mode="after")
    def _no_default_secret_in_production(self) -> Settings:
        if self.mode == "production" and self.secret_key == DEFAULT_SECRET_KEY:
            raise ConfigError(
                "DRAFTDESK_SECRET_KEY is left at its default; set it to a long random value "
                "(or run with DRAFTDESK_MODE=dev for local development)"
            )
        return self

    @model_validator(mode="after")
    def _oidc_complete(self) -> Settings:
        if self.oidc_issuer:
            missing = [n for n in ("oidc_client_id", "oidc_client_secret") if not getattr(self, n)]
            if missing:
                raise ConfigError(f"DRAFTDESK_OIDC_ISSUER is set but {', '.join('DRAFTDESK_' + n.upper() for n in missing)} is not")
            if not _https_or_loopback(self.oidc_issuer):
                raise ConfigError(f"DRAFTDESK_OIDC_ISSUER: {self.oidc_issuer!r} must be an https:// URL (http:// only on a loopback address)")
        elif not self.password_login:
            raise ConfigError("DRAFTDESK_PASSWORD_LOGIN=0 needs DRAFTDESK_OIDC_ISSUER: otherwise nobody could sign in")
        if self.oidc_role_map and not self.oidc_roles_claim:
            raise ConfigError("DRAFTDESK_OIDC_ROLE_MAP is set but DRAFTDESK_OIDC_ROLES_CLAIM (the claim it reads) is not")
        return self

    @property
    def oidc_enabled(self) -> bool:
        """Whether sign-in through the identity provider is configured."""
        return bool(self.oidc_issuer)

    @property
    def cookie_secure(self) -> bool:
        """Whether cookies are marked Secure: DRAFTDESK_SECURE_COOKIES when set, else production mode."""
        return self.mode == "production" if self.secure_cookies is None else self.secure_cookies

    @cached_property
    def eval_spec(self) -> EvalSpec:
        """The eval spec named by DRAFTDESK_SPEC, validated (SpecError names the bad key)."""
        return load_spec(self.spec)
