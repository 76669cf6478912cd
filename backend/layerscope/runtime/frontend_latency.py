"""What lies between a client and the engine: the parts of TTFT and E2EL outside the engine's steps, per engine.

    client ─ HTTP POST ─▶ API server: parse, tokenize ─ IPC ─▶ engine: next step boundary ─▶ steps ...
    client ◀─ SSE chunk ─ API server (SGLang: detokenizer process) ◀─ IPC ─ engine: token sampled

    request   tokenize the prompt (a fixed cost per call + a cost per token), parse the HTTP request, hand it on
    response  the sampled token back to the API server, detokenized, written as an SSE chunk, parsed by the client
    (the first scheduling delay, waiting for the running step to end, and async scheduling's one-step lag are the
    engine's: runtime/serving.py schedules a request at the first step boundary after it arrives, one step later
    when the engine schedules ahead; `lagged_arrival` below)

Every request pays both parts once: each token time a client records is the engine's plus the request part (the
engine saw the request that much later) plus the response part (the token reaches the client that much later).
So TTFT and E2EL grow by them, TPOT and ITL do not. The front end is not queued: its work per request is
milliseconds, spread over the API server's event loop (vLLM, SGLang both tokenize off the engine's process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layerscope.scenario import ScenarioSpec

# Tokenizing: a fixed cost per call plus a stream. HuggingFace tokenizers encode ~1.9 MB/s on one thread with a
# regex-split BPE like Qwen's (huggingface/tokenizers PR #1582, llama-3.1 on XNLI: 1.93 MB/s for 10 documents, 2.05
# for 10,000), ~2.1 us a token at ~4 bytes a token; tenstorrent/tt-inference-server issue #2173 logs 1.32 ms warm
# (2.8 ms cold) for a 131-token chat prompt, i.e. ~1.0 ms of call, template and Python overhead beside the stream.
# Both engines run HF's fast tokenizer in their API server process.
TOKENIZE_FIXED_US = 1_000.0
TOKENIZE_US_PER_TOKEN = 2.1
# vLLM: vllm-project/vllm PR #54628 scraped the server's own vllm:time_to_first_token_seconds beside the client's
# TTFT (`vllm bench serve`, backend openai, 512-token random prompts, concurrency 8): the client saw +8.4 and +12.0
# ms (the server's clock starts after tokenizing). Less the 2.1 ms of tokenizing 512 tokens, 8.1 ms is the HTTP
# request, the API server's preprocessing and its ZMQ hand-off to EngineCore, and the way back (output processor,
# incremental detokenize, SSE, client parse): split evenly between the two paths (an assumption: only the sum was
# measured, on a laptop CPU under WSL2).
VLLM_REQUEST_US = 4_050.0
VLLM_RESPONSE_US = 4_050.0
# SGLang: tenstorrent/tt-inference-server issue #3560 timed SGLang with a CPU-mock forward of 2.632 ms: median TTFT
# 9.54 ms for 128-token prompts at concurrency 1 (`vllm bench serve --backend openai-chat`): 6.9 ms outside the
# forward; less 1.3 ms of tokenizing, 5.6 ms for HTTP, the TokenizerManager, ZMQ to the scheduler, the
# DetokenizerManager process and the SSE stream, split evenly as for vLLM.
SGLANG_REQUEST_US = 2_800.0
SGLANG_RESPONSE_US = 2_800.0


@dataclass(frozen=True)
class FrontendLatency:
    engine: str
    tokenize_fixed_us: float
    tokenize_us_per_token: float
    request_us: float  # HTTP request, preprocessing, hand-off to the engine process
    response_us: float  # engine output to the client: IPC, detokenize, SSE chunk

    def parts_us(self, input_len: int) -> dict[str, float]:
        """The parts one request of `input_len` prompt tokens pays, in microseconds."""
        return {"tokenize": self.tokenize_us(input_len), "request": self.request_us, "response": self.response_us}

    def tokenize_us(self, input_len: int) -> float:
        return self.tokenize_fixed_us + self.tokenize_us_per_token * input_len

    def before_engine_us(self, input_len: int) -> float:
        return self.tokenize_us(input_len) + self.request_us

    def total_us(self, input_len: int) -> float:
        return self.before_engine_us(input_len) + self.response_us

    def summary(self, input_lens: list[int]) -> dict[str, float]:
        """TTFT's part outside the engine and its parts, means over the requests (summary keys)."""
        n = max(1, len(input_lens))
        parts = [self.parts_us(i) for i in input_lens]
        out = {"mean_frontend_ms": round(sum(self.total_us(i) for i in input_lens) / n / 1000.0, 4)}
        for name in ("tokenize", "request", "response"):
            out[f"mean_frontend_{name}_ms"] = round(sum(p[name] for p in parts) / n / 1000.0, 4)
        return out


FRONTENDS = {
    "vllm": FrontendLatency("vllm", TOKENIZE_FIXED_US, TOKENIZE_US_PER_TOKEN, VLLM_REQUEST_US, VLLM_RESPONSE_US),
    "sglang": FrontendLatency("sglang", TOKENIZE_FIXED_US, TOKENIZE_US_PER_TOKEN, SGLANG_REQUEST_US,
                              SGLANG_RESPONSE_US),
}


def frontend_for(spec: ScenarioSpec) -> FrontendLatency:
    """The front end of the engine a serving scenario imitates (deployment.engine; vLLM without a deployment)."""
    return FRONTENDS[spec.deployment.engine if spec.deployment is not None else "vllm"]


def lagged_arrival(schedules_ahead: bool, engine_busy: bool, step_start_us: float, now_us: float) -> float:
    """The latest arrival the scheduler sees at a step boundary `now_us`.

    A synchronous engine reads its input queue between steps: everything that arrived by now joins the next step.
    One that schedules ahead (vLLM's async scheduling: EngineCore.step_with_batch_queue schedules step N+1 before
    step N's output is processed; SGLang's overlap scheduler: event_loop_overlap launches the next batch before
    processing the last one's results) had already scheduled the coming step when the running one started: a
    request that arrived since then waits one more step. An idle engine takes a request at once."""
    return step_start_us if schedules_ahead and engine_busy else now_us


__all__ = ["FRONTENDS", "FrontendLatency", "frontend_for", "lagged_arrival"]
