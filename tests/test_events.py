"""layerscope.events: trusted events (the simulator's unvalidated fast path) behave as validated ones."""

from __future__ import annotations

from layerscope.events import MemoryEvent, trusted_event


def _values(used: float) -> dict[str, object]:
    return {"t_us": 1.0, "kind": "memory", "hbm_total_bytes": 8.0, "hbm_used_bytes": used, "hbm_free_bytes": 8.0 - used,
            "kv_bytes": 1.0, "largest_free_run_bytes": 2.0, "activation_bytes": 0.0}


def test_trusted_events_of_a_class_share_one_fields_set_equal_to_a_validated_ones() -> None:
    a, b = trusted_event(MemoryEvent, _values(3.0)), trusted_event(MemoryEvent, _values(4.0))
    validated = MemoryEvent.model_validate(_values(3.0))
    assert a.model_fields_set is b.model_fields_set  # one set a class, not one an event (memory: bench/README.md)
    assert a.model_fields_set == validated.model_fields_set == set(MemoryEvent.model_fields)
    assert a == validated and a.model_dump_json() == validated.model_dump_json()


def test_a_copy_of_a_trusted_event_leaves_the_shared_set_alone() -> None:
    a = trusted_event(MemoryEvent, _values(3.0))
    shared = set(a.model_fields_set)
    copied = a.model_copy(update={"hbm_used_bytes": 5.0})
    copied.model_fields_set.discard("kv_bytes")  # the copy's own set
    assert a.model_fields_set == shared and trusted_event(MemoryEvent, _values(1.0)).model_fields_set == shared
