"""The flags of issue 20's data-parallel deployments, shared by `plan` and `bench`: --dp, --nodes,
--all2all-backend, --eplb (vLLM's --data-parallel-size, --all2all-backend, --enable-eplb/--eplb-config)."""

from __future__ import annotations

import argparse
from typing import Any

from layerscope.deployment import All2AllBackend

BACKENDS: tuple[str, ...] = All2AllBackend.__args__  # type: ignore[attr-defined]


def add_dp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dp", type=int, default=None, help="attention data-parallel ranks (vLLM --data-parallel-size); "
                   "experts over all dp x tp GPUs")
    p.add_argument("--nodes", type=int, default=None, help="nodes of 8 GPUs the dp x tp GPUs fill (up to 8)")
    p.add_argument("--all2all-backend", choices=BACKENDS, default=None,
                   help="MoE dispatch/combine kernels with dp > 1 (vLLM's names; default deepep_low_latency)")
    p.add_argument("--eplb", default=None, metavar="REDUNDANT[:INTERVAL]",
                   help="expert-parallel load balancing: redundant experts, rebalanced every INTERVAL steps")


def dp_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The deployment fields the flags set (none when no flag is given)."""
    out: dict[str, Any] = {}
    for flag in ("dp", "nodes", "all2all_backend"):
        if getattr(args, flag, None) is not None:
            out[flag] = getattr(args, flag)
    if getattr(args, "eplb", None) is not None:
        out["eplb"] = parse_eplb(args.eplb)
    return out


def parse_eplb(text: str) -> dict[str, int]:
    redundant, _, interval = text.partition(":")
    try:
        eplb = {"num_redundant_experts": int(redundant)}
        if interval:
            eplb["step_interval"] = int(interval)
    except ValueError:
        raise ValueError(f"--eplb {text!r}: expected REDUNDANT[:INTERVAL], two integers (e.g. 32:3000)") from None
    return eplb
