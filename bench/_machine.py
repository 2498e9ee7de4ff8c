"""What every bench records about the machine at measurement time (shared by the bench scripts)."""

from __future__ import annotations

import os
import platform
from typing import Any


def machine() -> dict[str, Any]:
    """Load average, cores, torch threads and versions at measurement time."""
    import torch

    return {"load_avg_1_5_15": list(os.getloadavg()), "cpu_count": os.cpu_count(), "torch_threads":
            torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
            "processor": platform.processor() or platform.machine()}
