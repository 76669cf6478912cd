"""The base of every spec model (scenario.py, deployment.py), and the limit they share."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

MAX_PROMPT_LEN = 262_144  # the longest prompt a scenario may name, and max_model_len's bound: bounds one run's work


class Strict(BaseModel):
    """Strict types: `prompt_len: true` or `"8192"` is refused, not read as 1 or 8192 (an int is still a float)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True)

    # Fields added after recordings were made: left out of a dump while at their default, so that a spec that does
    # not use them dumps (and its run records) byte for byte as before (bench/event_digests.py).
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for name in self.OMITTED_AT_DEFAULT:
                if name in out and getattr(self, name) == type(self).model_fields[name].default:
                    del out[name]
            self._omit_derived(out)
        return out

    def _omit_derived(self, out: dict[str, Any]) -> None:
        """Fields a subclass leaves out of its dump because they follow from others (none here)."""
