"""Checks that a torch device and dtype can work here, made before any model is loaded (``ragen train``,
``ragen eval``, ``ragen serve``): a device this torch cannot reach fails with one line instead of after the model
loading. torch is imported only when the device is neither ``auto`` nor ``cpu`` (both always work, in every dtype
the trainer and the ``hf`` backend accept)."""

from __future__ import annotations

from ragen_core.errors import ConfigError

__all__ = ["check_device", "device_problem"]


def device_problem(device: str, dtype: str = "auto", prefix: str = "") -> str | None:
    """Why ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``, another torch device string) with ``dtype``
    cannot work on this machine, as one line naming ``{prefix}device`` / ``{prefix}dtype``; None when it can."""
    text = str(device).strip()
    if text in ("auto", "cpu"):
        return None
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        return f"{prefix}device={text} is not a torch device: use auto, cpu, cuda, cuda:N or mps"
    if dev.type == "cpu":
        return None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch build has no CUDA support" if torch.version.cuda is None
                   else "torch sees no CUDA device (driver, CUDA_VISIBLE_DEVICES?)")
            return f"{prefix}device={text} is not available: {why} ({torch.__version__}); use {prefix}device=cpu or auto"
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            return (f"{prefix}device={text} is not available: torch sees {count} CUDA device(s) "
                    f"(cuda:0..cuda:{count - 1})")
        if dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
            return f"{prefix}dtype=bfloat16 is not supported by this GPU: use {prefix}dtype=float32"
        return None
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            return f"{prefix}device={text} is not available: torch sees no Apple MPS device; use {prefix}device=cpu"
        return None
    backend = getattr(torch, dev.type, None)
    available = getattr(backend, "is_available", None)
    if dev.type == "meta" or (callable(available) and not available()):
        return f"{prefix}device={text} is not available on this machine; use {prefix}device=cpu or auto"
    return None


def check_device(device: str, dtype: str = "auto", prefix: str = "") -> None:
    """Raise a one-line :class:`ConfigError` when :func:`device_problem` finds one."""
    problem = device_problem(device, dtype, prefix)
    if problem is not None:
        raise ConfigError(problem)
