"""The user namespace of one run started by root (util-linux ``unshare``): uids 0, 65533 and 65534 mapped to
themselves, nested user namespaces disabled.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from typing import Any

from ragen_plugins_envs.sandbox.bwrap import BASE_ENV, PROGRAM_UID, SANDBOX_UID
from ragen_plugins_envs.sandbox.config import SandboxUnavailableError

_USERNS_SCRIPT = ("echo started && read go && "
                  "exec sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && echo ready || echo nested'")


def make_userns(deadline: float, fresh_proc: bool = False) -> int:
    """A new user namespace (as an fd) mapping uids/gids 0 and 65534 to themselves, with further user namespaces
    disabled inside it (``user.max_user_namespaces`` = 0, written by a helper that is root in it; with
    ``fresh_proc`` through its own procfs, for hosts whose ``/proc/sys`` is read-only). Needs root and util-linux's
    ``unshare``."""
    unshare = shutil.which("unshare") or "unshare"
    extra = ["--mount", "--pid", "--fork", "--mount-proc"] if fresh_proc else []
    helper = subprocess.Popen([unshare, "--user", *extra, "sh", "-c", _USERNS_SCRIPT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(BASE_ENV), close_fds=True)
    assert helper.stdin is not None and helper.stdout is not None
    stdout = helper.stdout

    def line() -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not _readable_within(stdout, remaining):
            raise SandboxUnavailableError("creating the sandbox's user namespace timed out")
        return stdout.readline()

    try:
        if line() != b"started\n":
            raise SandboxUnavailableError("util-linux unshare --user failed: "
                                          + (helper.stderr.read() if helper.poll() is not None and helper.stderr
                                             else b"").decode("utf-8", "replace")[-300:])
        mapping = f"0 0 1\n{PROGRAM_UID} {PROGRAM_UID} 1\n{SANDBOX_UID} {SANDBOX_UID} 1\n"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper.pid}/{name}", "w", encoding="ascii") as fh:
                fh.write(mapping)
        helper.stdin.write(b"go\n")
        helper.stdin.flush()
        answer = line()
        if answer != b"ready\n":
            raise SandboxUnavailableError("could not disable nested user namespaces in the sandbox's namespace "
                                          f"({answer.decode('ascii', 'replace').strip()!r})")
        return os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise SandboxUnavailableError(f"could not set up the sandbox's user namespace: {exc}") from exc
    finally:
        try:
            helper.stdin.close()
        except OSError:
            pass
        if helper.poll() is None:
            helper.kill()
        helper.wait()
        for stream in (helper.stdout, helper.stderr):
            if stream is not None:
                stream.close()


def _readable_within(stream: Any, timeout: float) -> bool:
    """Whether ``stream`` becomes readable within ``timeout`` seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        return bool(sel.select(timeout))
