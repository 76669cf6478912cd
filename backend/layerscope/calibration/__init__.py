"""Fits from data: the cost model's constants fitted to measured kernel timings, priced with the plans' own kernels.

    gemm.py              the roofline's GEMM and elementwise constants, from Vidur's profiles (`layerscope calibrate`)
    fused_moe.py         vLLM's Triton fused_moe kernel: two constants per architecture, from benchmark_moe timings
    decode_attention.py  the paged split-KV decode attention kernel: two constants per architecture

It sits above the plans (runtime/) and the cost model (hardware/), which only read the fitted constants stored in
hardware/cost.py; nothing at run time imports it.
"""
