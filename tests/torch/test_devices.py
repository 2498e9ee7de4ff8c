"""An impossible device or dtype is refused before any model is loaded, with one line and exit status 2 (train, eval,
serve); possible ones pass. This machine's torch may have a GPU: the refusals use devices it cannot have."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from ragen_core.cli import build_cli  # noqa: E402
from ragen_core.errors import ConfigError  # noqa: E402
from ragen_core.plugins import build_plugin_manager  # noqa: E402
from ragen_plugins_torch.devices import check_device, device_problem  # noqa: E402
from ragen_plugins_torch.trainer import TorchTrainer, TorchTrainerConfig  # noqa: E402

#: a CUDA index no machine has, and a CUDA device this machine cannot have when its torch sees none
MISSING_CUDA = "cuda:0" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"


def test_possible_devices_pass() -> None:
    for device, dtype in [("auto", "auto"), ("cpu", "float32"), ("cpu", "bfloat16"), ("cpu", "float16")]:
        assert device_problem(device, dtype) is None
    if torch.cuda.is_available():
        assert device_problem("cuda:0", "float32") is None


def test_impossible_devices_are_named() -> None:
    assert device_problem("gpu", prefix="trainer.") == (
        "trainer.device=gpu is not a torch device: use auto, cpu, cuda, cuda:N or mps")
    problem = device_problem(MISSING_CUDA, prefix="trainer.")
    assert problem is not None and problem.startswith(f"trainer.device={MISSING_CUDA} is not available: ")
    if not torch.cuda.is_available():
        assert "use trainer.device=cpu or auto" in problem
    assert device_problem("cuda:99") is not None
    assert device_problem("meta") is not None
    if not torch.backends.mps.is_available():
        assert "no Apple MPS device" in (device_problem("mps") or "")
    with pytest.raises(ConfigError, match=r"^device=cuda:99 is not available"):
        check_device("cuda:99")
    with pytest.raises(ConfigError, match="trainer.device=cuda:99"):
        TorchTrainer(TorchTrainerConfig(device="cuda:99"))


@pytest.mark.parametrize("args", [
    ["train", f"trainer.device={MISSING_CUDA}", "trainer.steps=1"],
    ["train", "trainer.device=gpu"],
    ["eval", f"trainer.device={MISSING_CUDA}"],
    ["eval", "-m", "tiny", "--env", "sokoban", "-o", f"device={MISSING_CUDA}"],
    ["serve", "tiny", "--device", MISSING_CUDA, "--port", "0"],
])
def test_an_impossible_device_is_refused_before_any_model_loads(args: list[str], tmp_path: Path) -> None:
    started = time.perf_counter()
    run_dir = tmp_path / "run"
    extra = ["--run-dir", str(run_dir)] if args[0] in ("train", "eval") else []
    res = CliRunner().invoke(build_cli(build_plugin_manager()), [*args, *extra])
    assert res.exit_code == 2, res.output + repr(res.exception)
    assert res.output.startswith("ragen: error: ") and res.output.count("\n") == 1, res.output  # one line
    assert "device=" in res.output and "report_failed" not in res.output
    assert not run_dir.exists()  # refused before the run started: no run directory, no report
    assert time.perf_counter() - started < 20
