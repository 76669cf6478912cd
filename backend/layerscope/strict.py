"""The base of every spec model (scenario.py, deployment.py), and the limit they share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MAX_PROMPT_LEN = 262_144  # the longest prompt a scenario may name, and max_model_len's bound: bounds one run's work


class Strict(BaseModel):
    """Strict types: `prompt_len: true` or `"8192"` is refused, not read as 1 or 8192 (an int is still a float)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)
