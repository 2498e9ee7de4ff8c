"""Running one job: the supervisor started in its sandbox (bubblewrap or the unsafe mode), fed the job, its output
read under an overall time and size limit, its report parsed.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

import attrs

from ragen_plugins_envs.sandbox.bwrap import PROGRAM_UID, SANDBOX_UID
from ragen_plugins_envs.sandbox.cgroups import GATE, RunCgroup, cgroup_parent
from ragen_plugins_envs.sandbox.config import SandboxConfig, SandboxUnavailableError
from ragen_plugins_envs.sandbox.seccomp import filter_hex
from ragen_plugins_envs.sandbox.userns import make_userns

log = logging.getLogger(__name__)


#: how much of each program's stderr is kept (its tail)
STDERR_TAIL_BYTES = 4096


@functools.cache
def sandbox_side_source(name: str) -> str:
    """The text of a sandbox-side module of this package: ``supervisor.py`` (run inside the sandbox with ``python
    -I -S -B -c``, never in this process) or ``child.py`` (the program's process, started by the supervisor)."""
    from importlib import resources

    return resources.files(__name__.rpartition(".")[0]).joinpath(name).read_text(encoding="utf-8")


@attrs.frozen
class Backend:
    """How a run of a mode starts: the command before the supervisor, its interpreter and environment."""

    mode: str
    prefix: tuple[str, ...]  #: command before ``python ... -c SUPERVISOR`` (bwrap + flags), empty when unsafe
    exe: str  #: the interpreter path the supervisor and children use
    env: tuple[tuple[str, str], ...]  #: the environment of the children
    userns: bool = False  #: whether each run needs a user namespace from :func:`make_userns` (bwrap as root)
    fresh_proc: bool = False  #: whether :func:`make_userns` needs its own procfs (read-only ``/proc/sys``)


def _job_limits(config: SandboxConfig, n_units: int, mode: str) -> dict[str, Any]:
    cpu = max(1, math.ceil(config.cpu_s))
    # RLIMIT_NPROC counts every process of the real user outside a user namespace: only meaningful in bwrap mode
    procs = config.max_procs if mode == "bwrap" else 0
    return {"cpu": cpu, "memory_mb": config.memory_mb, "max_file_mb": config.max_file_mb,
            "max_open_files": config.max_open_files, "max_procs": procs,
            "supervisor_cpu": cpu * (n_units + 1) + 10}


class _NotStarted(Exception):
    """The sandbox did not start; a run reports it as ``killed`` with this message (a probe raises instead)."""


def _not_started(detail: str, probe: bool) -> Exception:
    """What to raise when the sandbox did not start: a probe's SandboxUnavailableError, or a run's failure."""
    return SandboxUnavailableError(detail) if probe else _NotStarted(detail)


def run_job(backend: Backend, config: SandboxConfig, job: dict[str, Any], n_units: int, *,
            probe: bool = False) -> dict[str, Any]:
    """Run the supervisor on ``job`` and return its report, or ``{"failed": status, "detail": why}`` when it gave
    none. With ``probe``, a run that did not start (bubblewrap's own error) raises SandboxUnavailableError."""
    nonce = secrets.token_hex(16)
    workdir = None
    if backend.mode == "unsafe_subprocess":
        workdir = tempfile.mkdtemp(prefix="ragen-sandbox-")
    message = _job_message(backend, config, job, n_units, nonce, workdir)
    wall = 10.0 + n_units * (config.timeout_s + 1.5)
    deadline = time.monotonic() + wall
    cap = 8 * config.max_output_bytes * max(1, n_units) + (1 << 20)
    cgroup = _memory_cgroup(config)
    try:
        proc = _start_supervisor(backend, workdir, deadline, gated=cgroup is not None, probe=probe)
        data = _supervisor_input(proc, backend, message, cgroup, probe)
        out, err, timed_out = _communicate(proc, data, deadline, cap)
        oom_kills = cgroup.oom_kills() if cgroup is not None else 0
    except _NotStarted as exc:
        return {"failed": "killed", "detail": str(exc)}
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        if cgroup is not None:
            cgroup.remove()
    report = _parse_report(out, nonce)
    if report is not None:
        return _mark_oom(report) if oom_kills else report
    return _no_report(config, timed_out, proc.returncode, err, oom_kills, probe)


def _job_message(backend: Backend, config: SandboxConfig, job: dict[str, Any], n_units: int, nonce: str,
                 workdir: str | None) -> dict[str, Any]:
    """What the supervisor reads on its stdin (but the seccomp filter, added once its pid is known): the job, the
    child's source, the limits and the environment of the programs."""
    message = {**job, "nonce": nonce, "child": sandbox_side_source("child.py"), "python": backend.exe,
               "workdir": workdir or "/tmp", "env": dict(backend.env),
               "limits": _job_limits(config, n_units, backend.mode), "timeout_s": config.timeout_s,
               "max_output_bytes": config.max_output_bytes, "max_files": config.max_files,
               "count_files": backend.mode == "bwrap", "drop_to": SANDBOX_UID if backend.userns else None,
               "program_uid": PROGRAM_UID if backend.userns else None}
    if workdir is not None:
        message["env"]["HOME"] = workdir
    return message


def _memory_cgroup(config: SandboxConfig) -> RunCgroup | None:
    """The run's memory cgroup, or None where this process may make none (or making it failed: logged)."""
    parent = cgroup_parent()
    if parent is None:
        return None
    try:
        return RunCgroup(parent, config.total_memory_bytes)
    except OSError as exc:
        log.warning("sandbox: could not make the run's memory cgroup (%s); it is bounded by rlimits only", exc)
        return None


def _start_supervisor(backend: Backend, workdir: str | None, deadline: float, *, gated: bool,
                      probe: bool) -> subprocess.Popen:
    """Start the supervisor in its sandbox (its own process group; behind :data:`GATE` when ``gated``); bwrap as
    root first gets the run's user namespace. Raises :class:`_NotStarted` (a probe: SandboxUnavailableError)."""
    userns_fd = None
    prefix = list(backend.prefix)
    if backend.userns:
        try:
            userns_fd = make_userns(min(deadline, time.monotonic() + 30.0), backend.fresh_proc)
        except SandboxUnavailableError as exc:
            if probe:
                raise
            raise _NotStarted(f"the sandbox could not start: {exc}") from exc
        prefix = [str(userns_fd) if arg == "{USERNS}" else arg for arg in prefix]
    argv = [*prefix, backend.exe, "-I", "-S", "-B", "-c", sandbox_side_source("supervisor.py")]
    if gated:
        argv = [*GATE, *argv]
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(backend.env), cwd=workdir or "/", start_new_session=True,
                                close_fds=True, pass_fds=(userns_fd,) if userns_fd is not None else ())
    except OSError as exc:
        raise _not_started(f"could not start the sandbox ({argv[0]}): {exc}", probe) from exc
    finally:
        if userns_fd is not None:
            os.close(userns_fd)


def _supervisor_input(proc: subprocess.Popen, backend: Backend, message: dict[str, Any], cgroup: RunCgroup | None,
                      probe: bool) -> bytes:
    """The bytes to feed the started supervisor: ``message`` with the seccomp filter naming its pid, after the
    gate's line once the process is inside ``cgroup``. On failure the sandbox is killed first."""
    # the filter names the supervisor's pid: 1 in bubblewrap's pid namespace, the process itself otherwise
    try:
        message["seccomp"] = filter_hex(1 if backend.prefix else proc.pid)
    except SandboxUnavailableError:
        _kill_tree(proc)
        proc.wait()
        raise
    data = json.dumps(message).encode("utf-8", "surrogatepass")
    if cgroup is None:
        return data
    try:
        cgroup.add(proc.pid)  # the gate holds the sandbox's first process until it is inside
    except OSError as exc:
        _kill_tree(proc)
        proc.wait()
        raise _not_started(f"could not put the sandbox into its memory cgroup: {exc}", probe) from exc
    return b"go\n" + data


def _parse_report(out: bytes, nonce: str) -> dict[str, Any] | None:
    """The supervisor's report (a JSON object after the run's nonce on its stdout), or None."""
    text = out.decode("utf-8", "replace")
    if text.startswith(nonce):
        try:
            report = json.loads(text[len(nonce):])
        except ValueError:
            report = None
        if isinstance(report, dict):
            return report
    return None


def _no_report(config: SandboxConfig, timed_out: bool, returncode: int | None, err: bytes, oom_kills: int,
               probe: bool) -> dict[str, Any]:
    """The failure of a run whose supervisor gave no report (a probe raises SandboxUnavailableError)."""
    why = "the sandbox exceeded its overall time limit" if timed_out else (
        f"the sandbox ended without a report (exit status {returncode})")
    detail = err.decode("utf-8", "replace")[-STDERR_TAIL_BYTES:]
    if probe:
        raise SandboxUnavailableError(f"{why}: {detail.strip()}")
    if oom_kills:
        why += f"; the run's memory cgroup ({config.total_memory_bytes >> 20} MiB) killed {oom_kills} process(es)"
    return {"failed": "timeout" if timed_out else "killed", "detail": f"{why}: {detail.strip()}"[-1000:]}


def _mark_oom(report: dict[str, Any]) -> dict[str, Any]:
    """The run's memory cgroup killed a process: the results it ended (SIGKILL, not on a time limit) are ``memory``."""
    for result in report.get("results") or ():
        if isinstance(result, dict) and result.get("status") == "killed" and result.get("returncode") == -9:
            result["status"] = "memory"
    for outcome in report.get("outcomes") or ():
        if isinstance(outcome, dict) and outcome.get("status") == "killed" and "SIGKILL" in str(outcome.get("detail")):
            outcome["status"], outcome["detail"] = "memory", "killed by the run's memory limit (cgroup)"
    return report


def _communicate(proc: subprocess.Popen, data: bytes, deadline: float, cap: int) -> tuple[bytes, bytes, bool]:
    """Feed stdin, read stdout (at most ``cap`` bytes) and the tail of stderr until exit or ``deadline``."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    view = memoryview(data)
    timed_out = False
    with selectors.DefaultSelector() as sel:
        if view:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _events in sel.select(min(remaining, 1.0)):
                fileobj = key.fileobj
                if fileobj is proc.stdin:
                    try:
                        view = view[os.write(key.fd, view[:1 << 16]):]
                    except BlockingIOError:
                        continue
                    except OSError:
                        view = view[:0]
                    if not view:
                        sel.unregister(fileobj)
                        proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(fileobj)
                    continue
                if fileobj is proc.stdout:
                    out += chunk
                    if len(out) > cap:
                        sel.unregister(fileobj)
                        _kill_tree(proc)
                else:
                    err += chunk
                    if len(err) > 4 * STDERR_TAIL_BYTES:
                        del err[:-STDERR_TAIL_BYTES]
    _kill_tree(proc)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            stream.close()
        except OSError:
            pass
    return bytes(out), bytes(err), timed_out


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill the sandbox's process group (bwrap; its pid namespace dies with it) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
