"""The bubblewrap command line: where the Python installation appears inside (its layouts), the system binds, the
sandbox's users and base environment.

Part of :mod:`ragen_plugins_envs.sandbox`, whose docstring describes the design; import public names from there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig

import attrs

from ragen_plugins_envs.sandbox.config import SandboxConfig, SandboxUnavailableError

#: where the Python installation appears inside the sandbox (mapped layout)
INSIDE_PYTHON = "/opt/python"
#: the sandbox's user and group (host ``nobody``): the supervisor's, and the program's unless started by root
SANDBOX_UID = 65534
#: the program's own user when the sandbox is started by root (the supervisor stays ``SANDBOX_UID``): a different
#: uid, so the program cannot signal the supervisor or change its rlimits
PROGRAM_UID = 65533
#: the environment every sandbox process starts from (bubblewrap clears the host's)
BASE_ENV = (("PATH", "/usr/bin:/bin"), ("LANG", "C.UTF-8"))


def bwrap_path() -> str | None:
    """Where bubblewrap is installed, or None."""
    return shutil.which("bwrap")


def bwrap_version(path: str) -> tuple[int, ...]:
    """The version of the bubblewrap at ``path`` (``()`` when it does not say)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             env=dict(BASE_ENV)).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()


@attrs.frozen
class Layout:
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


def host_python() -> tuple[str, str]:
    """The host's real interpreter (not a virtualenv's link) and its installation prefix."""
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


def layouts() -> list[Layout]:
    """Candidate layouts, best first: the installation at ``/opt/python``, then at its own path."""
    exe, prefix = host_python()
    if not _under(exe, prefix):
        raise SandboxUnavailableError(
            f"the Python interpreter {exe} lies outside its installation prefix {prefix}; the sandbox cannot mount it")
    sites = [d for d in _site_dirs(prefix) if _under(d, prefix) or _under(d, "/usr")]
    if _under(prefix, "/usr"):
        return [Layout(exe=exe, binds=(), hidden=tuple(sites), env=())]
    mapped_sites = tuple(INSIDE_PYTHON + d[len(prefix):] if _under(d, prefix) else d for d in sites)
    mapped = Layout(exe=INSIDE_PYTHON + exe[len(prefix):], binds=((prefix, INSIDE_PYTHON),), hidden=mapped_sites,
                     env=(("LD_LIBRARY_PATH", INSIDE_PYTHON + "/lib"),))
    same = Layout(exe=exe, binds=((prefix, prefix),), hidden=tuple(sites), env=())
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


def running_as_root() -> bool:
    """Whether this process runs as root (then each run gets a user namespace of its own)."""
    return os.geteuid() == 0


def bwrap_command(config: SandboxConfig, layout: Layout | None = None, *, bwrap: str = "bwrap",
                  as_root: bool | None = None, disable_userns: bool = True) -> list[str]:
    """The bubblewrap command line (everything before the supervisor's ``python -I -S -B -c``).

    Run by root (``as_root``), bubblewrap joins a user namespace made for the run (:func:`make_userns`: only uids
    0 and 65534 mapped, nested user namespaces disabled), passed as ``--userns FD`` where the list says ``{USERNS}``;
    it keeps only CAP_SETUID/CAP_SETGID, which the supervisor uses to become uid/gid 65534 (host ``nobody``) before
    anything else. (``--unshare-user --uid 65534`` would map the sandbox user onto the calling user, i.e. host root,
    letting the program chmod root-owned inodes such as the bind-mounted ``/dev/null``.) Run by another user,
    ``--unshare-user --disable-userns --uid 65534 --gid 65534`` maps the sandbox user onto that user.
    """
    layout = layout or layouts()[0]
    as_root = running_as_root() if as_root is None else as_root
    cmd = [bwrap]
    if as_root:
        cmd += ["--userns", "{USERNS}", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    else:
        cmd += ["--unshare-all", "--unshare-user"]
        if disable_userns:
            cmd.append("--disable-userns")
        cmd += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
    cmd += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
    for key, value in (*BASE_ENV, ("HOME", "/tmp"), *layout.env):
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
