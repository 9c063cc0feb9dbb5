"""Rubrics: YAML files of metrics (integer scales) and flags (booleans), hashed like datasets.

A rubric is named by a built-in name (`default`, `support-draft`, files in this package's
rubrics/ folder) or by a path to a YAML file. From it come the judge's instructions and the
strict JSON schema its answer must fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from webapp.checks.types import CHECK_KEYS
from webapp.core.safe_input import InputLimitError, load_yaml
from webapp.datasets.loader import sha256_of
from webapp.evaluator.json_types import JsonObject

BUILTIN_DIR = Path(__file__).resolve().parent / "rubrics"
NAME_PATTERN = r"^[a-z][a-z0-9_]*$"


class RubricError(ValueError):
    """A rubric that cannot be used; the message names the file and the field."""


class Scale(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: int
    max: int

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
        return self


class Metric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    scale: Scale
    description: str = Field(min_length=1)


class Flag(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)


class RubricFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    output: Literal["text", "support_draft"] = "text"
    automated_checks: bool = False
    metrics: list[Metric] = Field(min_length=1)
    flags: list[Flag] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> RubricFile:
        names = [m.name for m in self.metrics] + [f.name for f in self.flags]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"metric and flag names must be unique; repeated: {', '.join(dupes)}")
        if self.automated_checks and self.output != "support_draft":
            raise ValueError("automated_checks needs output: support_draft (the checks read a structured draft)")
        return self


@dataclass(frozen=True)
class Rubric:
    """A loaded rubric with where it came from and the hash of its file."""

    spec: RubricFile
    path: str
    hash: str
    builtin: bool
    check_flags: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.spec.metrics]

    @property
    def judge_flag_names(self) -> list[str]:
        """Flags the judge answers."""
        return [f.name for f in self.spec.flags]

    @property
    def flag_names(self) -> list[str]:
        """Every flag of a sample: the judge's, then one per automated check."""
        return self.judge_flag_names + list(self.check_flags)


def builtin_names() -> list[str]:
    """List the built-in rubric names."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def load_rubric(ref: str) -> Rubric:
    """Load a rubric by built-in name or YAML path; raise RubricError naming the file and field."""
    builtin = BUILTIN_DIR / f"{ref}.yaml"
    if "/" not in ref and "\\" not in ref and builtin.is_file():
        path, is_builtin = builtin, True
    else:
        path, is_builtin = Path(ref), False
        if path.suffix.lower() not in (".yaml", ".yml"):
            raise RubricError(
                f"rubric {ref!r} is neither a built-in rubric ({', '.join(builtin_names())}) nor a .yaml/.yml file"
            )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RubricError(f"{path}: cannot read rubric file ({exc.strerror})") from exc
    try:
        raw = load_yaml(data.decode("utf-8-sig"))
    except InputLimitError as exc:
        raise RubricError(f"{path}:{exc.line}: refused: {exc.message}") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RubricError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise RubricError(f"{path}: a rubric must be a mapping with name, metrics and flags")
    try:
        spec = RubricFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RubricError(f"{path}: field '{loc}': {first['msg']}") from exc
    checks = tuple(f"check_{k}" for k in CHECK_KEYS) if spec.automated_checks else ()
    return Rubric(spec=spec, path=str(path.resolve()), hash=sha256_of(data), builtin=is_builtin, check_flags=checks)


def judge_schema(rubric: Rubric) -> JsonObject:
    """Return the strict JSON schema of the judge's answer: integer scores in scale, boolean flags, rationale."""
    props: JsonObject = {}
    for m in rubric.spec.metrics:
        props[m.name] = {"type": "integer", "minimum": m.scale.min, "maximum": m.scale.max, "description": m.description}
    for f in rubric.spec.flags:
        props[f.name] = {"type": "boolean", "description": f.description}
    props["rationale"] = {"type": "string", "description": "One or two sentences explaining the scores."}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


# Built once per rubric file (keyed by its content hash): a run asks for them on every sample.
_FORMATS: dict[str, JsonObject] = {}
_INSTRUCTIONS: dict[str, str] = {}


def judge_response_format(rubric: Rubric) -> JsonObject:
    """Return the `response_format` asking the judge for the rubric's schema (shared: do not mutate)."""
    cached = _FORMATS.get(rubric.hash)
    if cached is None:
        safe = "".join(ch if ch.isalnum() else "_" for ch in rubric.name)[:40]
        cached = {
            "type": "json_schema",
            "json_schema": {"name": f"judge_{safe}", "strict": True, "schema": judge_schema(rubric)},
        }
        _FORMATS[rubric.hash] = cached
    return cached


def judge_instructions(rubric: Rubric) -> str:
    """Return the judge's system message, listing every metric's scale and every flag."""
    cached = _INSTRUCTIONS.get(rubric.hash)
    if cached is None:
        cached = _INSTRUCTIONS[rubric.hash] = _build_instructions(rubric)
    return cached


def _build_instructions(rubric: Rubric) -> str:
    lines = [
        "You are a strict, consistent evaluator. Score the OUTPUT for the test case below against this rubric.",
        f"Rubric: {rubric.name}. {rubric.spec.description}".strip(),
        "",
        "Metrics (answer each with an integer within its scale):",
    ]
    for m in rubric.spec.metrics:
        lines.append(f"- {m.name} ({m.scale.min}-{m.scale.max}): {m.description}")
    if rubric.spec.flags:
        lines += ["", "Flags (answer each with true or false):"]
        for f in rubric.spec.flags:
            lines.append(f"- {f.name}: {f.description}")
    lines += ["", "Answer with one JSON object holding every metric, every flag and a short rationale."]
    return "\n".join(lines)
