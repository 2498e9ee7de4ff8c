"""The seccomp filter the supervisor installs in each program's process (built here, on the host, with libseccomp).

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import errno
import functools
import logging
import tempfile

from ragen_plugins_envs.sandbox.config import SandboxUnavailableError

log = logging.getLogger(__name__)


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
def filter_hex(supervisor_pid: int) -> str:
    return seccomp_filter(supervisor_pid).hex()
