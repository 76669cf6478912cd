"""Kernel.evolve: dataclasses.replace's result, field for field, without its walk over the fields."""

from __future__ import annotations

import dataclasses

import pytest

from layerscope.hardware.kernel import GemmOp, Kernel


def test_evolve_equals_dataclasses_replace_and_leaves_the_original_alone() -> None:
    k = Kernel("gemm", "qkv_proj", "gemm", 2.0e9, 4.0e6, shapes="[8,4096]", gemm=(8, 4096, 4096), ctas=16)
    op = GemmOp(8, 4096, 4096, "bf16")
    new = k.evolve(op=op, fixed_us=3.5)
    assert new == dataclasses.replace(k, op=op, fixed_us=3.5) and hash(new) == hash(dataclasses.replace(k, op=op,
                                                                                                         fixed_us=3.5))
    assert new is not k and k.op is None and k.fixed_us == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.fixed_us = 1.0  # type: ignore[misc]


def test_evolve_refuses_a_field_kernel_does_not_have() -> None:
    k = Kernel("add", "residual_add", "elementwise", 1.0, 2.0)
    with pytest.raises(TypeError, match="no field \\['fixed'\\]"):
        k.evolve(fixed=1.0)
