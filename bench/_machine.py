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


#: the file a bench leaves in each run directory it writes, so that it only ever replaces its own earlier output
MARK = ".ragen-bench"


def replace_bench_dir(path: Any) -> None:
    """Clear ``path`` for a new bench run: delete it only when an earlier bench run made it (it holds :data:`MARK`);
    a folder without the mark (a user's run, any other data) is never deleted and stops the bench with a clear
    message. Call :func:`mark_bench_dir` once the run has written the folder."""
    import shutil
    from pathlib import Path

    path = Path(path)
    if not path.exists():
        return
    if not (path / MARK).is_file():
        raise SystemExit(f"{path} exists and no bench made it (no {MARK} in it): it is left alone; "
                         "pass another --out, or move it away")
    shutil.rmtree(path)


def mark_bench_dir(path: Any) -> None:
    """Mark ``path`` as a bench run's output (see :func:`replace_bench_dir`)."""
    from pathlib import Path

    if Path(path).is_dir():
        (Path(path) / MARK).touch()
