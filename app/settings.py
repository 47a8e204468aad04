"""Service settings: one place for every knob.

All settings are read from environment variables with the prefix ``SVMSTREAM_``
(case-insensitive), e.g. ``SVMSTREAM_PORT=9000`` or ``SVMSTREAM_SNAPSHOT_INTERVAL_S=5``;
``svmstream serve`` command-line options override them.  See ``docs/service.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class Settings(BaseSettings):
    """Service configuration (environment prefix ``SVMSTREAM_``).

    The ``default_*`` fields are the hyperparameters of models created without them:
    the default model made at start and models created by ``PUT /models/{name}`` that
    omit a field.
    """

    model_config = SettingsConfigDict(env_prefix="SVMSTREAM_", case_sensitive=False, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    log_level: str = "info"

    snapshot_dir: Path = Path("./snapshots")
    snapshot_interval_s: float = Field(30.0, gt=0)
    snapshot_keep: int = Field(3, ge=1)
    restore_on_start: bool = True
    warm_up: bool = True

    max_body_bytes: int = Field(64 * MIB, ge=1)
    max_pending_batches: int = Field(8, ge=1)

    default_model: str = "default"
    create_default_model: bool = True
    default_algorithm: str = "bsgd"
    default_budget: int = Field(500, ge=1)
    default_gamma: float = Field(1.0, gt=0)
    default_c: float | None = Field(1.0, gt=0)
    default_lambda: float | None = Field(None, gt=0)
    default_n_samples: int | None = Field(None, ge=1)
    default_n_features: int | None = Field(None, ge=1)
    default_classes: list[Any] = Field(default_factory=lambda: [-1, 1])
    default_random_state: int | None = 0

    @field_validator("default_lambda", "default_n_samples", "default_n_features",
                     "default_random_state", "default_c", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
            return None
        return value

    def model_defaults(self) -> dict[str, Any]:
        """Hyperparameters for models created without explicit values (JSON names)."""
        return {
            "algorithm": self.default_algorithm,
            "budget": self.default_budget,
            "gamma": self.default_gamma,
            "C": self.default_c,
            "lambda": self.default_lambda,
            "n_samples": self.default_n_samples,
            "n_features": self.default_n_features,
            "classes": list(self.default_classes),
            "random_state": self.default_random_state,
        }
