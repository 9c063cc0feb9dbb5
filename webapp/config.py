"""Settings from the environment (prefix DRAFTDESK_) and the loaded eval spec."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from webapp.spec import EvalSpec, load_spec

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = PROJECT_ROOT / "data"
DEFAULT_SECRET_KEY = "draftdesk-insecure-development-key"


class ConfigError(RuntimeError):
    """Settings that must not be used as they are."""


class Settings(BaseSettings):
    """Runtime configuration; every field can be set as DRAFTDESK_<NAME> in the environment."""

    model_config = SettingsConfigDict(env_prefix="DRAFTDESK_", extra="ignore")

    database_url: str = f"sqlite:///{DATA_DIR / 'draftdesk.db'}"
    secret_key: str = DEFAULT_SECRET_KEY
    spec: Path = DATA_DIR / "eval_spec.yaml"
    # production refuses the default secret key; demo and dev accept it.
    mode: Literal["production", "demo", "dev"] = "production"
    # Session and CSRF cookies carry `Secure` (sent over HTTPS only). Unset: on in production mode,
    # off in demo and dev (served over plain HTTP on localhost); DRAFTDESK_SECURE_COOKIES=0 turns it off.
    secure_cookies: bool | None = None
    session_hours: int = 12
    login_max_failures: int = 5
    login_window_minutes: int = 15
    evaluator_prices: Path = DATA_DIR / "model_prices.yaml"
    # Where people open Draft Desk: the links in notifications start with it.
    base_url: str = "http://127.0.0.1:8000"
    # Background jobs (alert evaluation and delivery) run in the server; `draftdesk serve` turns them on.
    background_jobs: bool = False
    alerts_interval_seconds: float = 30.0
    # Operations (docs/deployment.md). Addresses whose X-Forwarded-For uvicorn believes (comma-separated, or "*"):
    # the reverse proxy's. Default: a proxy on the same host.
    forwarded_allow_ips: str = "127.0.0.1"
    # Where `serve` writes the backup it takes before applying migrations (and `db backup` by default).
    backup_dir: Path = DATA_DIR / "backups"
    # Retention (webapp/ops/retention.py), pruned hourly by the server and by `draftdesk db prune`.
    login_attempt_retention_days: int = Field(default=30, ge=1)
    outbox_retention_days: int = Field(default=30, ge=1)
    # Production events older than this many days are deleted; 0 keeps them forever.
    event_retention_days: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _no_default_secret_in_production(self) -> Settings:
        if self.mode == "production" and self.secret_key == DEFAULT_SECRET_KEY:
            raise ConfigError(
                "DRAFTDESK_SECRET_KEY is left at its default; set it to a long random value "
                "(or run with DRAFTDESK_MODE=dev for local development)"
            )
        return self

    @property
    def cookie_secure(self) -> bool:
        """Whether cookies are marked Secure: DRAFTDESK_SECURE_COOKIES when set, else production mode."""
        return self.mode == "production" if self.secure_cookies is None else self.secure_cookies

    @cached_property
    def eval_spec(self) -> EvalSpec:
        """The eval spec named by DRAFTDESK_SPEC, validated (SpecError names the bad key)."""
        return load_spec(self.spec)
