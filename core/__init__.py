"""The primitives under everything: the backend (imported before mlx: it preloads OpenBLAS), the
CPU ops and fused kernels, token log-probs, sampling, chat formatting, LoRA, quantization, the GGUF
cache, mixed precision, teacher forcing, the prompt sets, and plain utilities (errors, flags,
strict JSON, atomic writes, stats, diversity, the run folder).

The lowest layer: a core module imports only other core modules (tests/test_layers.py).
"""
