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
:func:`_cgroup_parent`), each run gets its own, with ``total_memory_mb`` (default ``2 * memory_mb + tmp_size_mb``)
for all its processes and its ``/tmp`` together, swap included. The sandbox's first process waits behind a shell
gate until the host has put it inside, so nothing of the run starts outside; the cgroup is removed after the run. A
process the kernel kills for that limit is reported as ``memory``. Elsewhere the bound is ``max_procs`` x
``memory_mb`` of address space plus the ``tmp_size_mb`` tmpfs (shared anonymous mappings count in the address
space; the filter closes the rest).

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
"""

from __future__ import annotations

import concurrent.futures
import enum
import errno
import functools
import json
import logging
import math
import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ragen_core.validators import integer, number, one_of

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

#: the sandbox modes: real isolation, or the explicit weak opt-in
MODES = ("bwrap", "unsafe_subprocess")
#: where the Python installation appears inside the sandbox (mapped layout)
INSIDE_PYTHON = "/opt/python"
#: how much of each program's stderr is kept (its tail)
STDERR_TAIL_BYTES = 4096
_SANDBOX_UID = 65534
#: the program's own user when the sandbox is started by root (the supervisor stays ``_SANDBOX_UID``): a different
#: uid, so the program cannot signal the supervisor or change its rlimits
_PROGRAM_UID = 65533
#: system calls the program may not make at all (EPERM): memory the address-space limit does not see (System V
#: shared memory and message queues, memfd, io_uring's rings, userfaultfd), the kernel keyring, and reaching into
#: other processes (ptrace, process_vm_*, perf events, bpf); each name unknown to this libseccomp is skipped
DENIED_SYSCALLS = ("memfd_create", "memfd_secret", "shmget", "shmat", "msgget", "semget", "io_uring_setup",
                   "userfaultfd", "add_key", "request_key", "keyctl", "ptrace", "process_vm_readv",
                   "process_vm_writev", "perf_event_open", "bpf")
#: system calls the program may not aim at the supervisor (first argument = its pid, compared on the low 32 bits,
#: as the kernel reads a pid_t) or at every process (``kill(-1, ...)``)
_AIMED_SYSCALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "prlimit64",
                   "sched_setaffinity", "sched_setscheduler", "sched_setparam")
_BASE_ENV = (("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8"))


class SandboxUnavailableError(RuntimeError):
    """The requested sandbox mode cannot run here (bubblewrap missing or not working)."""


class ExecStatus(str, enum.Enum):
    """How one program run ended."""

    OK = "ok"  #: exited with status 0
    TIMEOUT = "timeout"  #: wall-clock or CPU limit
    MEMORY = "memory"  #: MemoryError / allocation failure under the address-space limit
    RUNTIME_ERROR = "runtime_error"  #: non-zero exit (an uncaught exception, ``sys.exit(1)``...)
    KILLED = "killed"  #: ended by a signal it did not survive (segfault, kill...), or the sandbox itself failed
    OUTPUT_LIMIT = "output_limit"  #: more than ``max_output_bytes`` of output, the file-size or file-count limit


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


@attrs.frozen
class ExecResult:
    """One program run.

    :ivar status: how it ended.
    :ivar stdout: its standard output (UTF-8, undecodable bytes replaced), at most ``max_output_bytes``.
    :ivar stderr: the tail of its standard error (at most 4 KiB), or what went wrong.
    :ivar wall_s: wall-clock seconds of the run.
    :ivar returncode: exit status, negative signal number, or None when it was killed on a limit.
    """

    status: ExecStatus
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK


@attrs.frozen
class CallTest:
    """A function-call test: ``entry(*args)`` must equal ``expected`` (compared by the supervisor).

    Equality: tuples count as lists, floats match within 1e-6 (relative or absolute), and when ``expected`` is a
    one-element list the bare element also matches (the TACO/PrimeIntellect convention).
    """

    args: tuple[Any, ...]
    expected: Any


@attrs.frozen
class CodeTest:
    """A test written as trusted Python code calling ``candidate`` (e.g. one assertion of a HumanEval ``check``).

    :ivar source: statements run in the supervisor's test namespace (never in the program's process).
    :ivar counted: whether it is a test (False: setup, such as ``import math``, whose failure is not scored).
    """

    source: str
    counted: bool = True


@attrs.frozen
class TestOutcome:
    """The result of one counted test."""

    __test__ = False  # not a pytest class

    passed: bool
    status: ExecStatus
    detail: str = ""
    wall_s: float = 0.0


@attrs.frozen
class FunctionTestReport:
    """The outcomes of a function-call test run, in test order (counted tests only)."""

    outcomes: tuple[TestOutcome, ...]
    load_error: str = ""
    wall_s: float = 0.0

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)


# --------------------------------------------------------------------------------------------- output comparison

_FLOAT_TOLERANCE = 1e-6


def _normal_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _token_float(token: str) -> float | None:
    if len(token) > 64 or not re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def outputs_match(actual: str, expected: str) -> bool:
    """Whether a program's stdout matches the expected output.

    Lines are compared after removing trailing whitespace and leading/trailing blank lines (``\\r\\n`` counts as
    ``\\n``). Failing that, the whitespace-separated tokens must match one to one, where two numeric tokens also match
    when they are within 1e-6 (absolute or relative) of each other.
    """
    if not isinstance(actual, str) or not isinstance(expected, str):
        return False
    if _normal_lines(actual) == _normal_lines(expected):
        return True
    got, want = actual.split(), expected.split()
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        fa, fb = _token_float(a), _token_float(b)
        if fa is None or fb is None or not math.isclose(fa, fb, rel_tol=_FLOAT_TOLERANCE, abs_tol=_FLOAT_TOLERANCE):
            return False
    return True


# --------------------------------------------------------------------------------------------- the supervisor

@functools.cache
def _source(name: str) -> str:
    """The text of a sandbox-side module of this package: ``supervisor.py`` (run inside the sandbox with ``python
    -I -S -B -c``, never in this process) or ``child.py`` (the program's process, started by the supervisor)."""
    from importlib import resources

    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------- host side

def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _bwrap_version(path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             env=dict(_BASE_ENV)).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


@attrs.frozen
class _Layout:
    """Where the Python installation is inside the sandbox."""

    exe: str  #: the interpreter's path inside
    binds: tuple[tuple[str, str], ...]  #: read-only binds (host path, inside path)
    hidden: tuple[str, ...]  #: inside directories hidden behind an empty read-only tmpfs
    env: tuple[tuple[str, str], ...]  #: extra environment


def _under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), root]) == root
    except ValueError:
        return False


def _host_python() -> tuple[str, str]:
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return exe, os.path.realpath(sys.base_prefix)


def _site_dirs(prefix: str) -> list[str]:
    dirs: set[str] = set()
    for name in ("purelib", "platlib"):
        try:
            dirs.add(sysconfig.get_paths(vars={"base": prefix, "platbase": prefix, "installed_base": prefix,
                                               "installed_platbase": prefix})[name])
        except (KeyError, ValueError):
            continue
    for entry in sys.path:
        if entry.rstrip("/").endswith(("site-packages", "dist-packages")):
            dirs.add(entry)
    return sorted(os.path.realpath(d) for d in dirs if os.path.isdir(d))


def _layouts() -> list[_Layout]:
    """Candidate layouts, best first: the installation at ``/opt/python``, then at its own path."""
    exe, prefix = _host_python()
    if not _under(exe, prefix):
        raise SandboxUnavailableError(
            f"the Python interpreter {exe} lies outside its installation prefix {prefix}; the sandbox cannot mount it")
    sites = [d for d in _site_dirs(prefix) if _under(d, prefix) or _under(d, "/usr")]
    if _under(prefix, "/usr"):
        return [_Layout(exe=exe, binds=(), hidden=tuple(sites), env=())]
    mapped_sites = tuple(INSIDE_PYTHON + d[len(prefix):] if _under(d, prefix) else d for d in sites)
    mapped = _Layout(exe=INSIDE_PYTHON + exe[len(prefix):], binds=((prefix, INSIDE_PYTHON),), hidden=mapped_sites,
                     env=(("LD_LIBRARY_PATH", INSIDE_PYTHON + "/lib"),))
    same = _Layout(exe=exe, binds=((prefix, prefix),), hidden=tuple(sites), env=())
    return [mapped, same]


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args + ["--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]


def seccomp_filter(supervisor_pid: int = 1) -> bytes:
    """The seccomp program (classic BPF, ready for ``PR_SET_SECCOMP``) that the supervisor installs in each program's
    process before ``exec``: :data:`DENIED_SYSCALLS` fail with EPERM, so do the calls of ``_AIMED_SYSCALLS`` whose
    first argument is ``supervisor_pid`` (1 inside bubblewrap's pid namespace) or -1; anything else is allowed, and a
    system call of another ABI (32-bit ``int 0x80``, x32) kills the process. Built with libseccomp (``pyseccomp``)."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 missing
        raise SandboxUnavailableError(f"the sandbox needs libseccomp and pyseccomp (pip install pyseccomp; "
                                      f"Debian/Ubuntu: apt-get install -y libseccomp2): {exc}") from exc
    flt = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    eperm = pyseccomp.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(eperm, name)
        except (ValueError, OSError, RuntimeError):
            log.debug("seccomp: %s is not known here; not filtered", name)
    for name in _AIMED_SYSCALLS:
        for pid in (supervisor_pid, -1):
            try:
                flt.add_rule(eperm, name, pyseccomp.Arg(0, pyseccomp.MASKED_EQ, 0xFFFFFFFF, pid & 0xFFFFFFFF))
            except (ValueError, OSError, RuntimeError):
                log.debug("seccomp: %s is not known here; not filtered", name)
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


@functools.lru_cache(maxsize=16)
def _filter_hex(supervisor_pid: int) -> str:
    return seccomp_filter(supervisor_pid).hex()


def _as_root() -> bool:
    return os.geteuid() == 0


def bwrap_command(config: SandboxConfig, layout: _Layout | None = None, *, bwrap: str = "bwrap",
                  as_root: bool | None = None, disable_userns: bool = True) -> list[str]:
    """The bubblewrap command line (everything before the supervisor's ``python -I -S -B -c``).

    Run by root (``as_root``), bubblewrap joins a user namespace made for the run (:func:`_make_userns`: only uids
    0 and 65534 mapped, nested user namespaces disabled), passed as ``--userns FD`` where the list says ``{USERNS}``;
    it keeps only CAP_SETUID/CAP_SETGID, which the supervisor uses to become uid/gid 65534 (host ``nobody``) before
    anything else. (``--unshare-user --uid 65534`` would map the sandbox user onto the calling user, i.e. host root,
    letting the program chmod root-owned inodes such as the bind-mounted ``/dev/null``.) Run by another user,
    ``--unshare-user --disable-userns --uid 65534 --gid 65534`` maps the sandbox user onto that user.
    """
    layout = layout or _layouts()[0]
    as_root = _as_root() if as_root is None else as_root
    cmd = [bwrap]
    if as_root:
        cmd += ["--userns", "{USERNS}", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    else:
        cmd += ["--unshare-all", "--unshare-user"]
        if disable_userns:
            cmd.append("--disable-userns")
        cmd += ["--uid", str(_SANDBOX_UID), "--gid", str(_SANDBOX_UID), "--cap-drop", "ALL"]
    cmd += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
    for key, value in (*_BASE_ENV, ("HOME", "/tmp"), *layout.env):
        cmd += ["--setenv", key, value]
    cmd += _system_binds()
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(config.tmp_size_mb << 20),
            "--tmpfs", "/tmp"]
    made = {"/etc", "/tmp", "/usr", "/proc", "/dev"}
    for src, dst in layout.binds:
        for parent in _parents(dst):
            if parent not in made and not _under(parent, "/usr"):
                cmd += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        cmd += ["--ro-bind", src, dst]
    for hidden in layout.hidden:
        cmd += ["--size", "4096", "--tmpfs", hidden, "--remount-ro", hidden]
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/tmp"]
    return cmd


_USERNS_SCRIPT = ("echo started && read go && "
                  "exec sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && echo ready || echo nested'")


def _make_userns(deadline: float, fresh_proc: bool = False) -> int:
    """A new user namespace (as an fd) mapping uids/gids 0 and 65534 to themselves, with further user namespaces
    disabled inside it (``user.max_user_namespaces`` = 0, written by a helper that is root in it; with
    ``fresh_proc`` through its own procfs, for hosts whose ``/proc/sys`` is read-only). Needs root and util-linux's
    ``unshare``."""
    unshare = shutil.which("unshare") or "unshare"
    extra = ["--mount", "--pid", "--fork", "--mount-proc"] if fresh_proc else []
    helper = subprocess.Popen([unshare, "--user", *extra, "sh", "-c", _USERNS_SCRIPT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(_BASE_ENV), close_fds=True)
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
        mapping = f"0 0 1\n{_PROGRAM_UID} {_PROGRAM_UID} 1\n{_SANDBOX_UID} {_SANDBOX_UID} 1\n"
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


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and runs the sandbox here (probed once per process)."""
    try:
        _probe("bwrap")
    except SandboxUnavailableError:
        return False
    return True


@attrs.frozen
class _Backend:
    mode: str
    prefix: tuple[str, ...]  #: command before ``python ... -c SUPERVISOR`` (bwrap + flags), empty when unsafe
    exe: str  #: the interpreter path the supervisor and children use
    env: tuple[tuple[str, str], ...]  #: the environment of the children
    userns: bool = False  #: whether each run needs a user namespace from :func:`_make_userns` (bwrap as root)
    fresh_proc: bool = False  #: whether :func:`_make_userns` needs its own procfs (read-only ``/proc/sys``)


_PROBES: dict[str, _Backend | SandboxUnavailableError] = {}
_PROBE_LOCK = threading.Lock()
_WARNED = False


def _probe(mode: str) -> _Backend:
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


def _find_backend(mode: str) -> _Backend:
    exe, _prefix = _host_python()
    _filter_hex(1)  # libseccomp missing: one clear error here, before any program runs
    if mode == "unsafe_subprocess":
        return _Backend(mode=mode, prefix=(), exe=exe, env=(*_BASE_ENV,))
    path = _bwrap_path()
    if path is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed, so model code cannot be sandboxed: install it (Debian/Ubuntu: "
            f"apt-get install -y bubblewrap), or {_UNSAFE_HINT}")
    as_root = _as_root()
    if as_root and shutil.which("unshare") is None:
        raise SandboxUnavailableError(
            "running as root, the sandbox needs util-linux's 'unshare' to give the program its own unprivileged "
            f"user; install util-linux, run as another user, or {_UNSAFE_HINT}")
    version = _bwrap_version(path)
    probe_config = SandboxConfig(timeout_s=20.0, cpu_s=10.0)
    errors = []
    fresh_proc = False
    if as_root:
        for fresh_proc in (False, True):
            try:
                os.close(_make_userns(time.monotonic() + 30.0, fresh_proc))
                break
            except SandboxUnavailableError as exc:
                errors.append(str(exc))
        else:
            raise SandboxUnavailableError(f"cannot prepare the sandbox's user namespace: {' | '.join(errors)}")
    for layout in _layouts():
        for disable_userns in ((True,) if as_root else (True, False) if version >= (0, 8) else (False,)):
            prefix = tuple(bwrap_command(probe_config, layout, bwrap=path, as_root=as_root,
                                         disable_userns=disable_userns))
            backend = _Backend(mode=mode, prefix=prefix, exe=layout.exe, userns=as_root, fresh_proc=fresh_proc,
                               env=(*_BASE_ENV, ("HOME", "/tmp"), *layout.env))
            try:
                report = _run_job(backend, probe_config, {"kind": "stdio", "program": _PROBE_PROGRAM, "inputs": [""]},
                                  1, probe=True)
            except SandboxUnavailableError as exc:
                errors.append(str(exc))
                continue
            result = (report.get("results") or [{"status": report.get("failed"), "stderr": report.get("detail")}])[0]
            uid = _PROGRAM_UID if as_root else _SANDBOX_UID
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


# ---------------------------------------------------------------------------------------- memory cgroup of a run

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


def _cgroup_parent() -> tuple[int, str] | None:
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


class _RunCgroup:
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
_GATE = ("sh", "-c", 'read -r _ && exec "$@"', "ragen-sandbox")


def _job_limits(config: SandboxConfig, n_units: int, mode: str) -> dict[str, Any]:
    cpu = max(1, math.ceil(config.cpu_s))
    # RLIMIT_NPROC counts every process of the real user outside a user namespace: only meaningful in bwrap mode
    procs = config.max_procs if mode == "bwrap" else 0
    return {"cpu": cpu, "memory_mb": config.memory_mb, "max_file_mb": config.max_file_mb,
            "max_open_files": config.max_open_files, "max_procs": procs,
            "supervisor_cpu": cpu * (n_units + 1) + 10}


def _run_job(backend: _Backend, config: SandboxConfig, job: dict[str, Any], n_units: int, *,
             probe: bool = False) -> dict[str, Any]:
    """Run the supervisor on ``job`` and return its report, or ``{"failed": status, "detail": why}`` when it gave
    none. With ``probe``, a run that did not start (bubblewrap's own error) raises SandboxUnavailableError."""
    nonce = secrets.token_hex(16)
    workdir = None
    if backend.mode == "unsafe_subprocess":
        workdir = tempfile.mkdtemp(prefix="ragen-sandbox-")
    full = {**job, "nonce": nonce, "child": _source("child.py"), "python": backend.exe, "workdir": workdir or "/tmp",
            "env": dict(backend.env), "limits": _job_limits(config, n_units, backend.mode), "timeout_s": config.timeout_s,
            "max_output_bytes": config.max_output_bytes, "max_files": config.max_files,
            "count_files": backend.mode == "bwrap", "drop_to": _SANDBOX_UID if backend.userns else None,
            "program_uid": _PROGRAM_UID if backend.userns else None}
    if workdir is not None:
        full["env"]["HOME"] = workdir
    wall = 10.0 + n_units * (config.timeout_s + 1.5)
    deadline = time.monotonic() + wall
    cap = 8 * config.max_output_bytes * max(1, n_units) + (1 << 20)
    userns_fd = None
    cgroup = None
    parent = _cgroup_parent()
    if parent is not None:
        try:
            cgroup = _RunCgroup(parent, config.total_memory_bytes)
        except OSError as exc:
            log.warning("sandbox: could not make the run's memory cgroup (%s); it is bounded by rlimits only", exc)
    try:
        prefix = list(backend.prefix)
        if backend.userns:
            try:
                userns_fd = _make_userns(min(deadline, time.monotonic() + 30.0), backend.fresh_proc)
            except SandboxUnavailableError as exc:
                if probe:
                    raise
                return {"failed": "killed", "detail": f"the sandbox could not start: {exc}"}
            prefix = [str(userns_fd) if arg == "{USERNS}" else arg for arg in prefix]
        argv = [*prefix, backend.exe, "-I", "-S", "-B", "-c", _source("supervisor.py")]
        if cgroup is not None:
            argv = [*_GATE, *argv]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=dict(backend.env), cwd=workdir or "/", start_new_session=True,
                                    close_fds=True, pass_fds=(userns_fd,) if userns_fd is not None else ())
        except OSError as exc:
            if probe:
                raise SandboxUnavailableError(f"could not start the sandbox ({argv[0]}): {exc}") from exc
            return {"failed": "killed", "detail": f"could not start the sandbox ({argv[0]}): {exc}"}
        finally:
            if userns_fd is not None:
                os.close(userns_fd)
        # the filter names the supervisor's pid: 1 in bubblewrap's pid namespace, the process itself otherwise
        try:
            full["seccomp"] = _filter_hex(1 if backend.prefix else proc.pid)
        except SandboxUnavailableError:
            _kill_tree(proc)
            proc.wait()
            raise
        data = json.dumps(full).encode("utf-8", "surrogatepass")
        if cgroup is not None:
            try:
                cgroup.add(proc.pid)  # the gate holds the sandbox's first process until it is inside
            except OSError as exc:
                _kill_tree(proc)
                proc.wait()
                if probe:
                    raise SandboxUnavailableError(f"could not put the sandbox into its memory cgroup: {exc}") from exc
                return {"failed": "killed", "detail": f"could not put the sandbox into its memory cgroup: {exc}"}
            data = b"go\n" + data
        out, err, timed_out = _communicate(proc, data, deadline, cap)
        oom_kills = cgroup.oom_kills() if cgroup is not None else 0
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        if cgroup is not None:
            cgroup.remove()
    text = out.decode("utf-8", "replace")
    if text.startswith(nonce):
        try:
            report = json.loads(text[len(nonce):])
        except ValueError:
            report = None
        if isinstance(report, dict):
            return _mark_oom(report) if oom_kills else report
    why = "the sandbox exceeded its overall time limit" if timed_out else (
        f"the sandbox ended without a report (exit status {proc.returncode})")
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


# --------------------------------------------------------------------------------------------- the pool

_POOLS: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()
_IN_POOL = threading.local()


def _mark_pool_thread() -> None:
    _IN_POOL.active = True


def _pool(size: int) -> concurrent.futures.ThreadPoolExecutor:
    with _POOL_LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=size, thread_name_prefix="ragen-sandbox",
                                                         initializer=_mark_pool_thread)
            _POOLS[size] = pool
        return pool


def _in_pool_thread() -> bool:
    return bool(getattr(_IN_POOL, "active", False))


# --------------------------------------------------------------------------------------------- public API

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
        _probe(self.config.mode)

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
        backend = _probe(self.config.mode)
        chunks = self._chunks(len(inputs)) if parallel and not _in_pool_thread() else [range(len(inputs))]
        if len(chunks) == 1:
            return self._stdio_chunk(backend, program, inputs)
        pool = _pool(self.config.pool_size)
        futures = [pool.submit(self._stdio_chunk, backend, program, [inputs[i] for i in chunk]) for chunk in chunks]
        return [result for future in futures for result in future.result()]

    def _chunks(self, n: int) -> list[range]:
        parts = max(1, min(self.config.pool_size, n // 4))
        size = math.ceil(n / parts)
        return [range(i, min(n, i + size)) for i in range(0, n, size)]

    def _stdio_chunk(self, backend: _Backend, program: str, inputs: list[str]) -> list[ExecResult]:
        start = time.monotonic()
        report = _run_job(backend, self.config, {"kind": "stdio", "program": program, "inputs": inputs}, len(inputs))
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
        backend = _probe(self.config.mode)
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
        report = _run_job(backend, self.config, job, len(units) + 1)
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
        return _pool(self.config.pool_size).submit(fn, *args, **kwargs)

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
