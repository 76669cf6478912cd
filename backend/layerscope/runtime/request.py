"""One request as the scheduler sees it (vLLM v1's `Request`, reduced to what the simulator needs).

    num_tokens          = input_len + num_output_tokens     (tokens the request knows: prompt + sampled)
    num_computed_tokens = tokens whose KV is in the cache    (0 again after a recompute preemption)
    a step that brings num_computed_tokens up to num_tokens samples one more output token

Token ids are synthetic and deterministic (workload.py): the shared prefix is identical across requests,
which is what prefix caching keys on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class RequestStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Request:
    request_id: int
    arrival_us: float  # when the client means to send it (Poisson or trace time; 0 for all-at-once)
    input_len: int
    output_len: int
    token_ids: np.ndarray  # (input_len + output_len,) int32: prompt, then the tokens it will generate
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    num_preemptions: int = 0
    block_hashes: list[bytes] = field(default_factory=list)  # of full blocks, filled as tokens become known
    token_us: list[float] = field(default_factory=list)  # when each output token came (a summary-only run's)

    @property
    def num_tokens(self) -> int:
        return self.input_len + self.num_output_tokens

    @property
    def is_prefill(self) -> bool:
        """More than one known token lacks KV: a (re)computed prompt, not a decode."""
        return self.num_tokens - self.num_computed_tokens > 1 or self.num_output_tokens == 0
