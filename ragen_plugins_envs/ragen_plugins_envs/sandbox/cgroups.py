"""The memory cgroup of a run: where this process may make one (probed once), and the run's own cgroup.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time

log = logging.getLogger(__name__)


#: the file that sets a cgroup's memory limit, per cgroup version, and its swap companion
_CGROUP_FILES = {2: ("memory.max", "memory.swap.max"), 1: ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")}
_CGROUP_PARENT: list[tuple[int, str] | None] = []
_CGROUP_LOCK = threading.Lock()


def _own_memory_cgroups() -> list[tuple[int, str]]:
    """This process's memory cgroup folders that might take children: ``(version, path)``, v2 first."""
    try:
        lines = open("/proc/self/cgroup", encoding="ascii").read().splitlines()
        mounts = open("/proc/self/mountinfo", encoding="utf-8").read().splitlines()
    except OSError:
        return []
    own = {}
    for line in lines:
        _h, controllers, path = line.split(":", 2)
        if controllers == "":
            own[2] = path
        elif "memory" in controllers.split(","):
            own[1] = path
    found = []
    for line in mounts:
        left, _sep, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, point, fstype, options = fields[3], fields[4], extra[0], extra[2].split(",")
        version = 2 if fstype == "cgroup2" else 1 if fstype == "cgroup" and "memory" in options else 0
        if version not in own or not (own[version] + "/").startswith(root.rstrip("/") + "/"):
            continue
        folder = os.path.join(point, os.path.relpath(own[version], root))
        if version == 2:
            try:
                if "memory" not in open(os.path.join(folder, "cgroup.subtree_control")).read().split():
                    continue
            except OSError:
                continue
        found.append((version, os.path.normpath(folder)))
    return sorted(found, reverse=True)


def cgroup_parent() -> tuple[int, str] | None:
    """Where each run's memory cgroup goes (found once per process: a child folder must be creatable and take a
    limit), or None where this process may not make one (no delegated cgroup): then the runs have none."""
    with _CGROUP_LOCK:
        if not _CGROUP_PARENT:
            choice = None
            for version, folder in _own_memory_cgroups():
                probe = os.path.join(folder, f"ragen-sandbox-probe-{os.getpid()}-{secrets.token_hex(4)}")
                try:
                    os.mkdir(probe)
                except OSError:
                    continue
                try:
                    with open(os.path.join(probe, _CGROUP_FILES[version][0]), "w", encoding="ascii") as fh:
                        fh.write(str(64 << 20))
                    choice = (version, folder)
                except OSError:
                    pass
                finally:
                    try:
                        os.rmdir(probe)
                    except OSError:
                        pass
                if choice:
                    break
            if choice is None:
                log.debug("sandbox: no memory cgroup can be made here; runs are bounded by their rlimits only")
            _CGROUP_PARENT.append(choice)
        return _CGROUP_PARENT[0]


class RunCgroup:
    """The memory cgroup of one sandbox run: made with its limit (swap included) before the run's first process
    starts, removed when the run's processes are gone."""

    def __init__(self, parent: tuple[int, str], limit: int) -> None:
        self.version, folder = parent
        self.path = os.path.join(folder, f"ragen-sandbox-{os.getpid()}-{secrets.token_hex(6)}")
        os.mkdir(self.path)
        try:
            limit_file, swap_file = _CGROUP_FILES[self.version]
            self._write(limit_file, str(limit))
            if os.path.exists(os.path.join(self.path, swap_file)):
                # v2: swap beside memory.max; v1: memory + swap together
                self._write(swap_file, "0" if self.version == 2 else str(limit))
        except OSError:
            self.remove()
            raise

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w", encoding="ascii") as fh:
            fh.write(value)

    def add(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the run's memory limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in open(os.path.join(self.path, name), encoding="ascii"):
                key, _sep, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        for _ in range(100):  # the run's processes may take a moment to leave
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
        log.warning("sandbox: could not remove the run's memory cgroup %s", self.path)


#: a gate before the sandbox's first process: ``sh`` waits for a line on its stdin (sent once the host has put it
#: into the run's memory cgroup; the shell's ``read`` takes that line only), then becomes the command
GATE = ("sh", "-c", 'read -r _ && exec "$@"', "ragen-sandbox")
