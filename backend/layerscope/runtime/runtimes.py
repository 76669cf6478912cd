"""The runtimes by name: the article's layer and vLLM's (runtime/article.py, runtime/vllm.py), both RuntimePlans."""

from __future__ import annotations

from layerscope.runtime.article import ArticleRuntime
from layerscope.runtime.plan import RuntimePlan
from layerscope.runtime.vllm import VllmRuntime

RUNTIMES: dict[str, type[RuntimePlan]] = {"article": ArticleRuntime, "vllm": VllmRuntime}


def get_runtime(name: str) -> RuntimePlan:
    try:
        return RUNTIMES[name]()
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}; choose one of {', '.join(RUNTIMES)}") from None
