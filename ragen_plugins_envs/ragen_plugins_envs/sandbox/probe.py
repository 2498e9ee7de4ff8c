"""Which way of running works here: the backend of a mode, probed once per process (a real run of a small program).

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time

from ragen_plugins_envs.sandbox.bwrap import (
    BASE_ENV,
    PROGRAM_UID,
    SANDBOX_UID,
    bwrap_command,
    bwrap_path,
    bwrap_version,
    host_python,
    layouts,
    running_as_root,
)
from ragen_plugins_envs.sandbox.config import SandboxConfig, SandboxUnavailableError
from ragen_plugins_envs.sandbox.jobs import Backend, run_job
from ragen_plugins_envs.sandbox.seccomp import filter_hex
from ragen_plugins_envs.sandbox.userns import make_userns

log = logging.getLogger(__name__)


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and runs the sandbox here (probed once per process)."""
    try:
        backend_for("bwrap")
    except SandboxUnavailableError:
        return False
    return True


_PROBES: dict[str, Backend | SandboxUnavailableError] = {}
_PROBE_LOCK = threading.Lock()


def backend_for(mode: str) -> Backend:
    """How runs of ``mode`` start here (probed once per process); SandboxUnavailableError when it cannot run."""
    with _PROBE_LOCK:
        cached = _PROBES.get(mode)
        if cached is None:
            try:
                cached = _find_backend(mode)
            except SandboxUnavailableError as exc:
                cached = exc
            _PROBES[mode] = cached
    if isinstance(cached, SandboxUnavailableError):
        raise cached
    return cached


_UNSAFE_HINT = ("set sandbox_mode='unsafe_subprocess' to run model code WITHOUT isolation (rlimits and timeouts "
                "only; never on a machine you care about)")

#: what the probe prints inside: the interpreter version, the isolation flags, the user, and whether it may chmod
#: the host's /dev/null (to its current mode; it must not own host inodes)
_PROBE_PROGRAM = ("import os, sys\nprint(sys.version)\nprint(sys.flags.isolated, sys.flags.no_site)\n"
                  "print(os.getuid(), os.getgid())\n"
                  "try:\n    os.chmod('/dev/null', os.stat('/dev/null').st_mode & 0o7777)\n    print('chmod allowed')\n"
                  "except PermissionError:\n    print('chmod denied')")


def _find_backend(mode: str) -> Backend:
    exe, _prefix = host_python()
    filter_hex(1)  # libseccomp missing: one clear error here, before any program runs
    if mode == "unsafe_subprocess":
        return Backend(mode=mode, prefix=(), exe=exe, env=(*BASE_ENV,))
    path = bwrap_path()
    if path is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed, so model code cannot be sandboxed: install it (Debian/Ubuntu: "
            f"apt-get install -y bubblewrap), or {_UNSAFE_HINT}")
    as_root = running_as_root()
    if as_root and shutil.which("unshare") is None:
        raise SandboxUnavailableError(
            "running as root, the sandbox needs util-linux's 'unshare' to give the program its own unprivileged "
            f"user; install util-linux, run as another user, or {_UNSAFE_HINT}")
    version = bwrap_version(path)
    probe_config = SandboxConfig(timeout_s=20.0, cpu_s=10.0)
    errors = []
    fresh_proc = False
    if as_root:
        for fresh_proc in (False, True):
            try:
                os.close(make_userns(time.monotonic() + 30.0, fresh_proc))
                break
            except SandboxUnavailableError as exc:
                errors.append(str(exc))
        else:
            raise SandboxUnavailableError(f"cannot prepare the sandbox's user namespace: {' | '.join(errors)}")
    for layout in layouts():
        for disable_userns in ((True,) if as_root else (True, False) if version >= (0, 8) else (False,)):
            prefix = tuple(bwrap_command(probe_config, layout, bwrap=path, as_root=as_root,
                                         disable_userns=disable_userns))
            backend = Backend(mode=mode, prefix=prefix, exe=layout.exe, userns=as_root, fresh_proc=fresh_proc,
                               env=(*BASE_ENV, ("HOME", "/tmp"), *layout.env))
            try:
                report = run_job(backend, probe_config, {"kind": "stdio", "program": _PROBE_PROGRAM, "inputs": [""]},
                                  1, probe=True)
            except SandboxUnavailableError as exc:
                errors.append(str(exc))
                continue
            result = (report.get("results") or [{"status": report.get("failed"), "stderr": report.get("detail")}])[0]
            uid = PROGRAM_UID if as_root else SANDBOX_UID
            expected = f"{sys.version}\n1 1\n{uid} {uid}\nchmod denied"
            if result.get("status") == "ok" and result.get("stdout", "").strip() == expected:
                if not disable_userns:
                    log.warning("bubblewrap %s cannot disable nested user namespaces (--disable-userns needs >= 0.8)",
                                ".".join(map(str, version)))
                return backend
            errors.append(f"probe with {layout.exe} gave {result.get('status')}: "
                          f"{(result.get('stdout', '') + result.get('stderr', ''))[-300:]!r}")
    raise SandboxUnavailableError(
        f"bubblewrap ({path}, version {'.'.join(map(str, version)) or '?'}) does not work here: "
        f"{' | '.join(errors)[-1500:]}. It needs user namespaces (as root, or with unprivileged user namespaces "
        "enabled: sysctl kernel.unprivileged_userns_clone=1 / kernel.apparmor_restrict_unprivileged_userns=0; "
        f"containers may need --privileged or a seccomp profile allowing clone/unshare/mount), or {_UNSAFE_HINT}")
