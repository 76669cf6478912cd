"""The validation pass: CRC32 per bank of what the address map says against what was written.

    metadata  the decode address map vs the KV manager's write record (numerics off or on)
    numpy     CRC32 of each bank's cached K/V in the scaled faulty run vs the clean run (numerics on)

Returns the `crc` events and the failing banks; what to do about them (detection, repair) is the engine's.
"""

from __future__ import annotations

from layerscope.events import CrcEvent
from layerscope.runtime.kv.manager import KVManager
from layerscope.runtime.shadow import NumericShadow


def crc_pass(
    kv: KVManager, decode_map: list[tuple[int, int]], shadow: NumericShadow | None, t_us: float
) -> tuple[list[CrcEvent], list[int]]:
    got, want = kv.metadata_crc(decode_map)
    bad = [b for b, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    events = [CrcEvent(t_us=t_us, checked_banks=kv.pool.banks, bad_banks=bad, source="metadata")]
    if shadow is not None:
        faulty, clean = shadow.bank_crcs()
        np_bad = [b for b, (f, c) in enumerate(zip(faulty, clean, strict=True)) if f != c]
        events.append(CrcEvent(t_us=t_us, checked_banks=len(faulty), bad_banks=np_bad, source="numpy"))
        bad = sorted(set(bad) | set(np_bad))
    return events, bad
