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


def _reference(cls: type) -> type:
    """The same fields as `cls` in a plain frozen dataclass: the generated __init__ and __hash__ dict_init and
    Kernel's cached hash replace."""
    return dataclasses.make_dataclass(cls.__name__, [(f.name, f.type, f) for f in dataclasses.fields(cls)],
                                      frozen=True)


def test_dict_init_builds_the_instance_the_generated_init_builds() -> None:
    from layerscope.hardware.kernel import KernelCost

    op = GemmOp(8, 4096, 4096, "bf16")
    args = dict(name="gemm", stage="qkv_proj", kind="gemm", flops=2.0e9, bytes=4.0e6, gemm=(8, 4096, 4096), op=op)
    for cls, kwargs in ((Kernel, args), (KernelCost, dict(kernel=Kernel(**args), time_us=3.0, bound="memory",
                                                              hbm_util=0.5, l2_hit=0.25))):
        ref = _reference(cls)
        got, want = cls(**kwargs), ref(**kwargs)
        names = [f.name for f in dataclasses.fields(cls)]
        assert [getattr(got, n) for n in names] == [getattr(want, n) for n in names]
        assert [p for p in __import__("inspect").signature(cls).parameters] == names
        positional = cls(*[getattr(got, n) for n in names])
        assert positional == got and dataclasses.replace(got) == got
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.bound = "compute"  # type: ignore[misc]
        with pytest.raises(TypeError):
            cls()
    a, b = KernelCost(Kernel(**args), 1.0, "memory", 0.5, 0.0), KernelCost(Kernel(**args), 1.0, "memory", 0.5, 0.0)
    assert a.parts == {} and a.parts is not b.parts  # a default factory's fresh value per instance


def test_a_kernels_cached_hash_is_the_dataclass_hash_and_stays_out_of_copies_and_pickles() -> None:
    import copy
    import pickle

    k = Kernel("gemm", "qkv_proj", "gemm", 2.0e9, 4.0e6, gemm=(8, 4096, 4096), op=GemmOp(8, 4096, 4096))
    ref = _reference(Kernel)(**{f.name: getattr(k, f.name) for f in dataclasses.fields(Kernel)})
    assert hash(k) == hash(ref) == hash(k)  # computed, then read back
    for other in (pickle.loads(pickle.dumps(k)), copy.copy(k), copy.deepcopy(k), k.evolve(), dataclasses.replace(k)):
        assert "_hash" not in other.__dict__ and other == k and hash(other) == hash(k)
    assert hash(k.evolve(fixed_us=1.0)) == hash(dataclasses.replace(ref, fixed_us=1.0))
    assert repr(k) == repr(ref).replace(ref.__class__.__qualname__, "Kernel", 1)


def test_kernel_equality_is_the_dataclass_equality_hashed_or_not() -> None:
    """Kernel.__eq__ (its instance dicts compared) answers as the generated field-by-field equality does, on every
    pair of many plans' kernels and their copies, each side hashed (the cached hash in its dict) or not."""
    import math

    from layerscope.deployment import DeploymentSpec, shard
    from layerscope.hardware.gpus import gpu
    from layerscope.model.config import preset
    from layerscope.runtime.runtimes import get_runtime
    from layerscope.runtime.sharded import ShardedRuntime

    model, dep = preset("qwen3-235b-a22b"), DeploymentSpec(tp=8)
    plan, local = ShardedRuntime(get_runtime("vllm"), dep, gpu("h200"), model), shard(model, dep)
    ks = [k for batch in ([(1, 0)], [(1, 4096)] * 9, [(300, 0), (1, 800)]) for k in plan.step_kernels(local, batch)]
    ks += [ks[0].evolve(fixed_us=1.0), ks[0].evolve(flops=math.nan), ks[0].evolve(gemm=(1, 2, 3))]
    fields = [f.name for f in dataclasses.fields(Kernel)]

    def plain(a: Kernel, b: Kernel) -> bool:  # the dataclass's own: the tuples of the fields
        return tuple(getattr(a, n) for n in fields) == tuple(getattr(b, n) for n in fields)

    for hashed in ((False, False), (True, False), (False, True), (True, True)):
        left, right = [k.evolve() for k in ks], [k.evolve() for k in ks]  # fresh copies: no cached hash
        for side, on in zip((left, right), hashed, strict=True):
            if on:
                for k in side:
                    hash(k)
        for a in left:
            for b in right:
                assert (a == b) is plain(a, b) and (a != b) is not plain(a, b)
    assert ks[0] != "not a kernel" and ks[0].__eq__(1) is NotImplemented
