"""The sandbox's configuration (:class:`SandboxConfig`), its modes, and the error of a mode that cannot run here.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import os

import attrs

from ragen_core.validators import integer, number, one_of

#: the sandbox modes: real isolation, or the explicit weak opt-in
MODES = ("bwrap", "unsafe_subprocess")


class SandboxUnavailableError(RuntimeError):
    """The requested sandbox mode cannot run here (bubblewrap missing or not working)."""


@attrs.frozen
class SandboxConfig:
    """Limits of one sandboxed program run.

    :ivar mode: ``"bwrap"`` (namespaces + rlimits) or ``"unsafe_subprocess"`` (rlimits + timeout only; warns).
    :ivar timeout_s: wall-clock seconds per program run (per test), after which its process group is killed.
    :ivar cpu_s: CPU seconds per process (``RLIMIT_CPU``, rounded up to whole seconds).
    :ivar memory_mb: address space per process (``RLIMIT_AS``), MiB.
    :ivar max_procs: processes of the sandbox user (``RLIMIT_NPROC``); binds in ``bwrap`` mode.
    :ivar max_output_bytes: bytes read from each of stdout/stderr of a run (and of a function-call result).
    :ivar max_file_mb: largest file a program may write (``RLIMIT_FSIZE``), MiB.
    :ivar max_open_files: open file descriptors per process (``RLIMIT_NOFILE``).
    :ivar max_files: files (inodes) allowed in the private ``/tmp`` (``bwrap`` mode; polled every 20 ms).
    :ivar tmp_size_mb: size of the private ``/tmp`` tmpfs (``bwrap`` mode), MiB.
    :ivar workers: threads of the shared pool (parallel sandbox processes); 0: one per CPU, at most 8.
    :ivar total_memory_mb: memory of one sandbox run, all its processes and its ``/tmp`` together (a memory
        cgroup, where the machine lets this process make one); 0: ``2 * memory_mb + tmp_size_mb``.
    """

    mode: str = attrs.field(default="bwrap", validator=one_of(*MODES))
    timeout_s: float = attrs.field(default=5.0, validator=number(0, low_open=True))
    cpu_s: float = attrs.field(default=5.0, validator=number(0, low_open=True))
    memory_mb: int = attrs.field(default=1024, validator=integer(64, note="the interpreter needs it"))
    max_procs: int = attrs.field(default=32, validator=integer(4, note="the supervisor and the program"))
    max_output_bytes: int = attrs.field(default=1 << 20, validator=integer(1))
    max_file_mb: int = attrs.field(default=16, validator=integer(1))
    max_open_files: int = attrs.field(default=64, validator=integer(16, note="Python needs a few"))
    max_files: int = attrs.field(default=1000, validator=integer(1))
    tmp_size_mb: int = attrs.field(default=64, validator=integer(1))
    workers: int = attrs.field(default=0, validator=integer(0, note="0: one per CPU, at most 8"))
    total_memory_mb: int = attrs.field(default=0, validator=integer(0, note="0: twice memory_mb plus the private /tmp"))

    @property
    def total_memory_bytes(self) -> int:
        """The memory cgroup's limit of one run, in bytes."""
        return (self.total_memory_mb or 2 * self.memory_mb + self.tmp_size_mb) << 20

    @property
    def pool_size(self) -> int:
        """The number of pool threads (``workers``, or one per CPU up to 8)."""
        return self.workers or max(1, min(8, os.cpu_count() or 1))
