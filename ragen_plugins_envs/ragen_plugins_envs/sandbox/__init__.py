"""A sandbox for untrusted Python programs (model-written code): bubblewrap namespaces, rlimits, timeouts, caps.

Nothing here executes model code in the calling process. Every run starts a separate process tree:

``host (this process)`` → ``bwrap`` → ``supervisor`` (pid 1 of a fresh pid namespace: trusted code, the module
:mod:`~ragen_plugins_envs.sandbox.supervisor`, whose text is run with ``python -I -S -B -c``; ragen never imports
it) → one ``python -I -S -B`` child per test (:mod:`~ragen_plugins_envs.sandbox.child`), which runs the model's
program.

**Isolation (mode ``"bwrap"``, the default).** The flag set (:func:`bwrap_command`), verified in this container
(Debian 12, kernel 6.x, bubblewrap 0.8.0, as root and as an unprivileged user; see ``tests/envs/test_sandbox.py``)::

    bwrap <user namespace, see below>
          --hostname sandbox --die-with-parent --new-session --as-pid-1
          --clearenv --setenv PATH /usr/bin:/bin --setenv LANG C.UTF-8 --setenv HOME /tmp [--setenv LD_LIBRARY_PATH ..]
          --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 ...
          --perms 0755 --dir /etc --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache
          --proc /proc --dev /dev --perms 1777 --size TMP_BYTES --tmpfs /tmp
          --perms 0755 --dir /opt --ro-bind PYTHON_PREFIX /opt/python
          --size 4096 --tmpfs <its site-packages> --remount-ro <its site-packages>
          --remount-ro /dev --remount-ro / --chdir /tmp
          python -I -S -B -c SUPERVISOR

User namespace, run by an unprivileged user: ``--unshare-all --unshare-user --disable-userns --uid 65534 --gid 65534
--cap-drop ALL`` (the sandbox user maps onto the calling user). Run by root, that would map the sandbox user onto
host root, which then *owns* every root-owned inode it can see (it could chmod the bind-mounted ``/dev/null`` of the
host; verified). So for root each run gets its own user namespace made by util-linux ``unshare`` (uids/gids 0 and
65534 mapped to themselves, ``user.max_user_namespaces`` set to 0 inside it), joined with ``--userns FD
--unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup-try --cap-drop ALL --cap-add CAP_SETUID
--cap-add CAP_SETGID``; the supervisor's first act is to become uid/gid 65534 (host ``nobody``), which drops those
two capabilities, and to clear its inheritable set. (bubblewrap's own ``--uid/--gid`` cannot be used with
``--userns``: it calls setuid before setgid and fails.)

- namespaces: user (the program is uid/gid 65534 with no capabilities, ``NoNewPrivs``, and cannot create user
  namespaces), network (only a private loopback: no route out, no DNS), pid (only the sandbox's processes exist in
  its new ``/proc``), ipc, uts, cgroup (where available), mount;
- file system: a read-only ``/usr`` (with the merged-``/usr`` links), the Python installation read-only at
  ``/opt/python`` (its ``site-packages`` hidden behind an empty read-only tmpfs; ``LD_LIBRARY_PATH`` points at its
  ``lib``), ``/etc/ld.so.cache`` only (no ``/etc/passwd``, ``/etc/shadow``, ``resolv.conf``...), a read-only root
  and ``/dev``, and one writable private ``/tmp`` (a tmpfs of ``tmp_size_mb``). The project, the home directory and
  everything else of the host do not exist inside. When the installation cannot run from ``/opt/python`` (the
  version seen inside differs from the host's) it is bound read-only at its own path instead (probed once);
- processes: ``--as-pid-1`` makes the supervisor pid 1, so no bubblewrap helper (holding the host's environment and
  pipes) is visible inside, and signals from inside the namespace (``kill -9 1``, ``kill(-1, 9)``) cannot kill it;
  the supervisor is non-dumpable, so the programs cannot read its memory, environment or file descriptors through
  ``/proc``; ``--die-with-parent`` and the pid namespace kill every process of the sandbox when the run ends or the
  host kills it;
- environment: bubblewrap starts from an empty environment (``PATH``, ``LANG``, ``HOME=/tmp`` and
  ``LD_LIBRARY_PATH`` only); the host's variables never enter.

**Limits.** The supervisor sets rlimits on itself and, in each forked child, before ``exec`` of the program:
``RLIMIT_CPU`` (``cpu_s``; SIGXCPU, then SIGKILL one second later), ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_NPROC``
(``max_procs``: counted per sandbox, as the sandbox's user lives in its own user namespace), ``RLIMIT_FSIZE``
(``max_file_mb``), ``RLIMIT_NOFILE`` (``max_open_files``) and ``RLIMIT_CORE`` (0). Each program runs in its own
process group with a wall-clock limit (``timeout_s``): on expiry the whole group is killed.

**System calls (seccomp).** Each program's process gets a seccomp filter (built on the host with libseccomp through
``pyseccomp``, :func:`seccomp_filter`; installed after ``NoNewPrivs`` just before ``exec``, so the supervisor itself
is unfiltered). It refuses (EPERM) the calls whose memory ``RLIMIT_AS`` does not count — System V shared memory,
message queues and semaphores, ``memfd_create``/``memfd_secret``, ``io_uring_setup``, ``userfaultfd`` — and
``ptrace``, ``process_vm_*``, ``perf_event_open``, ``bpf`` and the kernel keyring (:data:`DENIED_SYSCALLS`); it
refuses signals, ``pidfd_open``, ``prlimit64`` and scheduler changes aimed at the supervisor's pid or at every
process (``-1``), comparing the 32 bits the kernel reads; a system call of another ABI (32-bit ``int 0x80``, x32)
kills the process.

**The run's memory (cgroup).** Where this process may make memory cgroups (cgroup v2 with the memory controller
delegated to its cgroup, or a writable v1 memory hierarchy, as root in most containers; probed once,
:func:`~ragen_plugins_envs.sandbox.cgroups.cgroup_parent`), each run gets its own, with ``total_memory_mb`` (default
``2 * memory_mb + tmp_size_mb``) for all its processes and its ``/tmp`` together, swap included. The sandbox's first
process waits behind a shell gate until the host has put it inside, so nothing of the run starts outside; the cgroup
is removed after the run. A process the kernel kills for that limit is reported as ``memory``. Elsewhere the bound
is ``max_procs`` x ``memory_mb`` of address space plus the ``tmp_size_mb`` tmpfs (shared anonymous mappings count in
the address space; the filter closes the rest).

**The supervisor's own process.** Started by root, the program runs under a uid of its own (65533, mapped in the
run's user namespace) while the supervisor stays 65534 with only CAP_SETUID/CAP_SETGID/CAP_KILL of that namespace
(to switch the program to its uid and to kill it); the program has no capability, so the kernel refuses its signals
and rlimit changes against the supervisor even without the filter. Started by an unprivileged user, bubblewrap can
map one uid only, so the program shares the supervisor's: there the filter and pid 1's signal rules protect the
supervisor (signals from inside its namespace reach pid 1 only for a handler it installed, and its one handler, the
per-test SIGALRM backstop, ignores an alarm that comes before its timer's time). Output is read at most
``max_output_bytes`` per stream (the program is killed beyond that: ``output_limit``); stderr is kept as its last
4 KiB. The number of files in ``/tmp`` is polled (every 20 ms) and the program killed beyond ``max_files`` (the
tmpfs itself has no inode limit in bubblewrap). The host adds an overall wall-clock limit and an output cap on the
supervisor, and kills the whole process group on expiry. No ``preexec_fn`` runs in the host, so the pool threads
are safe.

**Results cannot be forged.** For stdin/stdout tests the expected outputs never enter the sandbox: the host compares
(:func:`outputs_match`). For function-call tests the supervisor (which holds the expected values and the test code)
runs the program in a separate, freshly exec'd child (so it never holds the tests in memory) and only exchanges
arguments and results with it, both as ``marshal`` data: builtin values only (no code objects), so no object with a
forged ``__eq__`` can come back. The supervisor's report carries a per-run random nonce, read from its stdin before
any program starts; the programs cannot reach its stdout (separate pipes, non-dumpable supervisor).

**Mode ``"unsafe_subprocess"``** (explicit opt-in, with a loud warning): the same supervisor, rlimits and timeouts,
in a private temporary directory, without namespaces. The program can read and write what the host user can, use
the network and signal host processes; the process-count limit is not applied (outside a user namespace it would
count every process of the user) and children that start their own session may outlive a killed run. Only for
trusted code, or machines where bubblewrap cannot run.

:class:`Sandbox` refuses to run (:class:`SandboxUnavailableError`) when bubblewrap is missing or does not work here
(it probes once per process), unless the config selects ``"unsafe_subprocess"``. Runs go through a shared
``ThreadPoolExecutor`` of ``workers`` threads (:meth:`Sandbox.submit`, :meth:`Sandbox.map`); each thread drives its
own sandbox process.

**Modules.** This package holds :class:`Sandbox` and re-exports the public names of its modules, one job each:
``config`` (:class:`SandboxConfig`, the modes, :class:`SandboxUnavailableError`), ``results`` (the tests a run
takes, the results it gives), ``compare`` (:func:`outputs_match`), ``bwrap`` (the command line, the layouts of the
Python installation, the sandbox's users), ``seccomp`` (the filter), ``userns`` (the user namespace of a run
started by root), ``cgroups`` (the memory cgroup of a run), ``jobs`` (running the supervisor on one job: start,
feed, read, kill, parse its report), ``probe`` (which backend works here, once per process) and ``pool`` (the
shared threads). ``supervisor`` and ``child`` run inside the sandbox only: they are read as text, never imported.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ragen_plugins_envs.sandbox.bwrap import INSIDE_PYTHON as INSIDE_PYTHON
from ragen_plugins_envs.sandbox.bwrap import bwrap_command
from ragen_plugins_envs.sandbox.compare import outputs_match
from ragen_plugins_envs.sandbox.config import MODES, SandboxConfig, SandboxUnavailableError
from ragen_plugins_envs.sandbox.jobs import STDERR_TAIL_BYTES as STDERR_TAIL_BYTES
from ragen_plugins_envs.sandbox.jobs import Backend, run_job
from ragen_plugins_envs.sandbox.pool import in_pool_thread, shared_pool
from ragen_plugins_envs.sandbox.probe import backend_for, bwrap_available
from ragen_plugins_envs.sandbox.results import (
    CallTest,
    CodeTest,
    ExecResult,
    ExecStatus,
    FunctionTestReport,
    TestOutcome,
)
from ragen_plugins_envs.sandbox.seccomp import DENIED_SYSCALLS as DENIED_SYSCALLS
from ragen_plugins_envs.sandbox.seccomp import seccomp_filter as seccomp_filter

__all__ = [
    "MODES",
    "CallTest",
    "CodeTest",
    "ExecResult",
    "ExecStatus",
    "FunctionTestReport",
    "Sandbox",
    "SandboxConfig",
    "SandboxUnavailableError",
    "TestOutcome",
    "bwrap_available",
    "bwrap_command",
    "outputs_match",
]

log = logging.getLogger(__name__)

_WARNED = False


class Sandbox:
    """Runs untrusted Python programs in the configured sandbox (see the module docstring).

    Construct with a :class:`SandboxConfig` or its fields as keywords. The first use probes the mode (once per
    process) and raises :class:`SandboxUnavailableError` when it cannot run; :meth:`check` does it eagerly.
    ``"unsafe_subprocess"`` warns (``RuntimeWarning`` and a log error) on construction.
    """

    def __init__(self, config: SandboxConfig | None = None, **options: Any) -> None:
        if config is None:
            config = SandboxConfig(**options)
        elif options:
            config = attrs.evolve(config, **options)
        self.config = config
        if config.mode == "unsafe_subprocess":
            _warn_unsafe()

    @property
    def mode(self) -> str:
        return self.config.mode

    def check(self) -> None:
        """Probe the mode now: raise :class:`SandboxUnavailableError` when it cannot run here."""
        backend_for(self.config.mode)

    # ------------------------------------------------------------------------------------------ single runs

    def run(self, program: str, stdin: str = "") -> ExecResult:
        """Run ``program`` once with ``stdin``; the result of the run."""
        return self.run_stdio(program, [stdin])[0]

    def run_stdio(self, program: str, inputs: Sequence[str], *, parallel: bool = True) -> list[ExecResult]:
        """Run ``program`` once per input (each a fresh process with that stdin), in test order.

        With ``parallel`` and several inputs, the inputs are split over up to ``workers`` sandboxes run through the
        pool (inline when called from a pool thread).
        """
        inputs = [str(i) for i in inputs]
        if not inputs:
            return []
        backend = backend_for(self.config.mode)
        chunks = self._chunks(len(inputs)) if parallel and not in_pool_thread() else [range(len(inputs))]
        if len(chunks) == 1:
            return self._stdio_chunk(backend, program, inputs)
        pool = shared_pool(self.config.pool_size)
        futures = [pool.submit(self._stdio_chunk, backend, program, [inputs[i] for i in chunk]) for chunk in chunks]
        return [result for future in futures for result in future.result()]

    def _chunks(self, n: int) -> list[range]:
        parts = max(1, min(self.config.pool_size, n // 4))
        size = math.ceil(n / parts)
        return [range(i, min(n, i + size)) for i in range(0, n, size)]

    def _stdio_chunk(self, backend: Backend, program: str, inputs: list[str]) -> list[ExecResult]:
        start = time.monotonic()
        report = run_job(backend, self.config, {"kind": "stdio", "program": program, "inputs": inputs}, len(inputs))
        if "failed" in report:
            status = ExecStatus(report["failed"])
            wall = time.monotonic() - start
            return [ExecResult(status=status, stderr=report["detail"], wall_s=wall) for _ in inputs]
        results = []
        for raw in report["results"]:
            results.append(ExecResult(status=ExecStatus(raw["status"]), stdout=raw["stdout"], stderr=raw["stderr"],
                                      wall_s=float(raw["wall_s"]), returncode=raw["returncode"]))
        return results

    def run_function_tests(self, program: str, entry: str, tests: Sequence[CallTest | CodeTest], *,
                           test_prelude: str = "", method_class: str = "Solution") -> FunctionTestReport:
        """Load ``program`` in a child process and run ``tests`` against its function ``entry``.

        ``CodeTest`` sources run in the supervisor with ``candidate`` bound to a proxy of the program's function
        and the names of ``test_prelude`` (trusted code, e.g. helper functions the tests use); ``CallTest`` calls
        it with arguments and compares the result. When the program defines no function ``entry`` but a class
        ``method_class`` with that method, ``method_class().entry`` is called (LeetCode style). A test exceeding
        ``timeout_s`` fails, and the program is restarted for the next test (at most three restarts).
        """
        backend = backend_for(self.config.mode)
        units = []
        for test in tests:
            if isinstance(test, CodeTest):
                units.append({"code": test.source, "counted": bool(test.counted)})
            elif isinstance(test, CallTest):
                units.append({"args": list(test.args), "expected": test.expected})
            else:
                raise TypeError(f"tests must be CallTest or CodeTest, got {type(test).__name__}")
        counted = sum(1 for u in units if u.get("counted", True))
        start = time.monotonic()
        job = {"kind": "function", "program": program, "entry": entry, "method_class": method_class,
               "test_prelude": test_prelude, "tests": units}
        report = run_job(backend, self.config, job, len(units) + 1)
        wall = time.monotonic() - start
        if "failed" in report:
            status = ExecStatus(report["failed"])
            return FunctionTestReport(outcomes=tuple(TestOutcome(False, status, report["detail"][:300])
                                                     for _ in range(counted)), wall_s=wall)
        outcomes = tuple(TestOutcome(passed=bool(o["passed"]), status=ExecStatus(o["status"]), detail=o["detail"],
                                     wall_s=float(o["wall_s"])) for o in report["outcomes"])
        return FunctionTestReport(outcomes=outcomes, load_error=report.get("load_error", ""), wall_s=wall)

    # ------------------------------------------------------------------------------------------ the pool

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        """Run ``fn(*args, **kwargs)`` (e.g. ``sandbox.run``) on the shared pool of ``workers`` threads."""
        return shared_pool(self.config.pool_size).submit(fn, *args, **kwargs)

    def map(self, programs: Iterable[str], stdins: Iterable[str] | None = None) -> list[ExecResult]:
        """Run each program once (with the matching stdin) through the pool; results in order."""
        programs = list(programs)
        inputs = list(stdins) if stdins is not None else [""] * len(programs)
        if len(inputs) != len(programs):
            raise ValueError(f"{len(programs)} programs but {len(inputs)} stdins")
        futures = [self.submit(self.run, p, s) for p, s in zip(programs, inputs, strict=True)]
        return [f.result() for f in futures]


def _warn_unsafe() -> None:
    global _WARNED
    message = ("sandbox_mode='unsafe_subprocess': model-written code runs WITHOUT namespaces or file-system "
               "isolation (rlimits and timeouts only). It can read your files, use the network and signal your "
               "processes. Use the 'bwrap' mode (apt-get install -y bubblewrap) for anything but trusted code.")
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    if not _WARNED:
        _WARNED = True
        log.error(message)
