"""The hostile-code suite of the sandbox: each case runs real hostile code and asserts containment.

The cases need bubblewrap (``apt-get install -y bubblewrap``); without it they are skipped, unless
``RAGEN_REQUIRE_SANDBOX=1`` is set (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

import ragen_plugins_envs.sandbox as sandbox_module
import ragen_plugins_envs.sandbox.bwrap as bwrap_module
import ragen_plugins_envs.sandbox.cgroups as cgroups_module
import ragen_plugins_envs.sandbox.probe as probe_module
from ragen_plugins_envs.sandbox import (
    CallTest,
    CodeTest,
    ExecStatus,
    Sandbox,
    SandboxConfig,
    SandboxUnavailableError,
    bwrap_command,
    outputs_match,
)

REPO = Path(__file__).resolve().parents[2]
LIMITS = {"timeout_s": 1.0, "cpu_s": 1.0, "memory_mb": 256, "max_output_bytes": 65536, "max_procs": 24}
SLACK_S = 3.0  # start-up and teardown allowance on a loaded two-core machine
#: the program's uid: its own (65533) when root starts the sandbox, else the one uid an unprivileged user can map
PROGRAM_UID = str(bwrap_module.PROGRAM_UID if os.geteuid() == 0 else bwrap_module.SANDBOX_UID)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    box = Sandbox(**LIMITS)
    try:
        box.check()
    except SandboxUnavailableError as exc:
        if os.environ.get("RAGEN_REQUIRE_SANDBOX"):
            pytest.fail(f"RAGEN_REQUIRE_SANDBOX is set but the sandbox cannot run: {exc}")
        pytest.skip(f"bubblewrap sandbox unavailable: {exc}")
    return box


def report(result: sandbox_module.ExecResult) -> dict:
    """The JSON a probe program printed on its last stdout line."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, (result.status, result.stdout[-500:], result.stderr[-800:])
    return json.loads(lines[-1])


PROBE_HELPERS = '''
import json, os, sys
def attempt(fn):
    try:
        value = fn()
    except BaseException as exc:
        return "ERR " + type(exc).__name__ + ": " + str(exc)[:120]
    return "OK " + repr(value)[:200]
'''


def host_processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in comm or marker in cmdline:
            found.append(f"{pid} {comm} {cmdline[:80]}")
    return found


def wait_no_processes_with(marker: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(marker) == []


# ------------------------------------------------------------------------------------------------ file system

def test_files_outside_are_invisible(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-" + secrets.token_hex(8))
    paths = ["/root", "/root/.bashrc", "/etc/shadow", "/etc/passwd", "/etc/hosts", "/home", "/work", str(REPO),
             str(REPO / "pyproject.toml"), os.path.expanduser("~"), str(secret), str(tmp_path),
             "/var/run/docker.sock", "/sys/kernel"]
    program = PROBE_HELPERS + f'''
paths = {paths!r}
out = {{}}
for p in paths:
    out[p] = [attempt(lambda: os.listdir(p)), attempt(lambda: open(p, "rb").read(64))]
out["root"] = sorted(os.listdir("/"))
out["etc"] = sorted(os.listdir("/etc"))
out["site"] = [(d, sorted(os.listdir(d))) for d in sys.path if os.path.isdir(d) and "site-packages" in d]
print(json.dumps(out))
'''
    result = sandbox.run(program)
    assert result.ok, result.stderr
    out = report(result)
    for path in paths:
        assert all(r.startswith("ERR") for r in out[path]), (path, out[path])
        assert all("FileNotFoundError" in r or "PermissionError" in r for r in out[path]), (path, out[path])
    assert set(out["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc", "sbin",
                                "tmp", "usr"}, out["root"]
    assert out["etc"] == ["ld.so.cache"] or out["etc"] == [], out["etc"]
    assert "TOP-SECRET" not in result.stdout


def test_python_site_packages_are_hidden(sandbox: Sandbox) -> None:
    program = ("import os, sys, sysconfig\n"
               "d = sysconfig.get_paths()['purelib']\n"
               "print(sys.flags.isolated, sys.flags.no_site, os.path.isdir(d) and os.listdir(d))\n"
               "import importlib.util\n"
               "print(importlib.util.find_spec('attrs'), importlib.util.find_spec('ragen_core'))")
    result = sandbox.run(program)
    assert result.ok, result.stderr
    assert result.stdout.split("\n")[:2] == ["1 1 []", "None None"], result.stdout


def test_writes_outside_fail_and_touch_nothing_on_the_host(sandbox: Sandbox) -> None:
    token = secrets.token_hex(6)
    targets = [str(REPO / f"pwned_{token}.txt"), f"/usr/pwned_{token}", f"/opt/python/pwned_{token}",
               f"/pwned_{token}", f"/etc/pwned_{token}", f"/dev/pwned_{token}", f"/dev/shm/pwned_{token}",
               f"/proc/pwned_{token}", f"/usr/lib/pwned_{token}"]
    program = PROBE_HELPERS + f'''
targets = {targets!r}
out = {{t: attempt(lambda: open(t, "w").write("x")) for t in targets}}
out["mkdir"] = attempt(lambda: os.makedirs({str(REPO)!r}, exist_ok=True))
out["chmod_null"] = attempt(lambda: os.chmod("/dev/null", 0o666))
out["chmod_usr"] = attempt(lambda: os.chmod("/usr/bin", 0o777))
out["tmp"] = attempt(lambda: open("/tmp/inside_{token}", "w").write("private"))
print(json.dumps(out))
'''
    result = sandbox.run(program)
    out = report(result)
    for key, value in out.items():
        if key == "tmp":
            assert value == "OK 7", value
        elif key == "mkdir" and str(REPO).startswith("/tmp/"):
            # a checkout under /tmp: inside the sandbox that path lies on its private tmpfs, so creating it there
            # may succeed; it must touch nothing on the host (checked below)
            assert value.startswith(("OK", "ERR")), value
        else:
            assert value.startswith("ERR"), (key, value)
    for target in targets:
        assert not Path(target).exists(), target
    assert not Path(f"/tmp/inside_{token}").exists()
    assert not any(p.name.startswith("pwned_") for p in REPO.iterdir())
    assert oct(os.stat("/dev/null").st_mode & 0o777) == "0o666"


def test_chdir_chroot_and_proc_root_escapes_fail(sandbox: Sandbox) -> None:
    program = PROBE_HELPERS + '''
for _ in range(50):
    os.chdir("..")
out = {"cwd": os.getcwd(), "listing": sorted(os.listdir("."))}
out["chroot"] = attempt(lambda: os.chroot("/tmp"))
out["proc1root"] = attempt(lambda: os.listdir("/proc/1/root"))
out["proc1cwd"] = attempt(lambda: os.listdir("/proc/1/cwd"))
out["selfroot"] = attempt(lambda: open("/proc/self/root/etc/shadow").read())
out["symlink"] = attempt(lambda: (os.symlink("/proc/1/root", "/tmp/r"), os.listdir("/tmp/r/")))
out["dotdot"] = attempt(lambda: open("/tmp/../../../../../../root/.bashrc").read())
out["openat"] = attempt(lambda: os.listdir(os.open("/", os.O_RDONLY)))
print(json.dumps(out))
'''
    out = report(sandbox.run(program))
    assert out["cwd"] == "/" and "root" not in out["listing"] and "work" not in out["listing"]
    for key in ("chroot", "proc1root", "proc1cwd", "selfroot", "symlink", "dotdot"):
        assert out[key].startswith("ERR"), (key, out[key])
    assert "root" not in out["openat"] and "work" not in out["openat"]


# ------------------------------------------------------------------------------------------------ network

def test_network_is_unreachable(sandbox: Sandbox) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = server.accept()
            except OSError:
                continue
            accepted.append(addr)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        host_ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        host_ip = "10.0.0.1"
    program = PROBE_HELPERS + f'''
import socket
out = {{}}
out["loopback"] = attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=0.5))
out["host_ip"] = attempt(lambda: socket.create_connection(({host_ip!r}, {port}), timeout=0.5))
out["dns"] = attempt(lambda: socket.getaddrinfo("pypi.org", 443))
out["udp"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53)))
out["tcp_out"] = attempt(lambda: socket.create_connection(("1.1.1.1", 443), timeout=0.5))
out["interfaces"] = sorted(name for _i, name in socket.if_nameindex())
print(json.dumps(out))
'''
    try:
        result = sandbox.run(program)
    finally:
        stop.set()
        thread.join(timeout=2)
        server.close()
    out = report(result)
    for key in ("loopback", "host_ip", "dns", "udp", "tcp_out"):
        assert out[key].startswith("ERR"), (key, out[key])
    assert out["interfaces"] == ["lo"], out["interfaces"]
    assert accepted == []


# ------------------------------------------------------------------------------------------------ processes

def test_fork_bomb_is_bounded_and_leaves_nothing(sandbox: Sandbox) -> None:
    marker = "rgbomb" + secrets.token_hex(3)
    program = f'''
import os
open("/proc/self/comm", "w").write({marker!r})
while True:
    try:
        os.fork()
    except OSError:
        pass
'''
    start = time.monotonic()
    result = sandbox.run(program)
    assert time.monotonic() - start < LIMITS["timeout_s"] + SLACK_S
    assert result.status is ExecStatus.TIMEOUT
    wait_no_processes_with(marker)
    assert sandbox.run("print('still fine')").stdout == "still fine\n"


def test_process_count_is_limited(sandbox: Sandbox) -> None:
    program = '''
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as exc:
    print(n, exc.errno)
'''
    result = sandbox.run(program)
    assert result.ok, result.stderr
    forks, errno = map(int, result.stdout.split())
    assert forks < LIMITS["max_procs"] and errno == 11  # EAGAIN


def test_subprocesses_stay_inside_and_die_with_the_run(sandbox: Sandbox) -> None:
    marker = f"4242.{secrets.randbelow(10**6)}"
    program = f'''
import subprocess
r = subprocess.run(["sh", "-c", "id -u; cat /etc/shadow; ls /root; ls /work; echo $HOME"], capture_output=True,
                   text=True)
print(r.stdout.split())
print("shadow" in r.stderr and "root" in r.stderr)
subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
subprocess.Popen(["sleep", "{marker}"])
'''
    result = sandbox.run(program)
    assert result.ok, result.stderr
    assert result.stdout.splitlines() == [f"['{PROGRAM_UID}', '/tmp']", "True"], result.stdout
    wait_no_processes_with(marker)


def test_killing_the_parent_and_everything_leaves_the_host_alive(sandbox: Sandbox) -> None:
    program = PROBE_HELPERS + f'''
import signal
out = {{"ppid": os.getppid()}}
out["ppid_kill"] = attempt(lambda: os.kill(os.getppid(), signal.SIGKILL))
out["init_kill"] = attempt(lambda: os.kill(1, signal.SIGKILL))
out["host_pid"] = attempt(lambda: os.kill({os.getpid()}, signal.SIGKILL))
out["pgrp"] = attempt(lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL))
print(json.dumps(out), flush=True)
os.kill(-1, signal.SIGKILL)
'''
    result = sandbox.run(program)
    out = report(result)
    assert out["ppid"] == 1  # the supervisor is the sandbox's init, which ignores signals from inside
    assert result.status in (ExecStatus.KILLED, ExecStatus.RUNTIME_ERROR), result
    os.kill(os.getpid(), 0)
    assert sandbox.run("print(6 * 7)").stdout == "42\n"


def test_ignoring_sigterm_does_not_save_a_runaway(sandbox: Sandbox) -> None:
    program = '''
import signal
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU, signal.SIGALRM, signal.SIGUSR1):
    signal.signal(s, signal.SIG_IGN)
while True:
    pass
'''
    start = time.monotonic()
    result = sandbox.run(program)
    assert result.status is ExecStatus.TIMEOUT
    assert time.monotonic() - start < LIMITS["timeout_s"] + SLACK_S


def test_infinite_loop_times_out(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run("while True:\n    pass\n")
    assert result.status is ExecStatus.TIMEOUT and result.returncode is None
    assert time.monotonic() - start < LIMITS["timeout_s"] + SLACK_S


def test_sleep_hits_the_wall_clock_limit(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run("import time\nprint('before', flush=True)\ntime.sleep(120)\n")
    elapsed = time.monotonic() - start
    assert result.status is ExecStatus.TIMEOUT and result.stdout == "before\n"
    assert LIMITS["timeout_s"] <= elapsed < LIMITS["timeout_s"] + SLACK_S


@pytest.mark.slow
def test_cpu_limit_kills_a_busy_process_even_without_the_wall_clock() -> None:
    box = Sandbox(**{**LIMITS, "timeout_s": 20.0, "cpu_s": 1.0})
    _skip_without_bwrap(box)
    start = time.monotonic()
    result = box.run("while True:\n    pass\n")
    assert result.status is ExecStatus.TIMEOUT
    assert result.returncode is None  # killed on a limit (SIGXCPU), as for the wall clock: no exit status
    assert time.monotonic() - start < 10.0


def _skip_without_bwrap(box: Sandbox) -> None:
    try:
        box.check()
    except SandboxUnavailableError as exc:
        if os.environ.get("RAGEN_REQUIRE_SANDBOX"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


# ------------------------------------------------------------------------------------------------ memory, output, files

@pytest.mark.parametrize("program", [
    "x = bytearray(10**10)",
    pytest.param("chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))", marks=pytest.mark.slow),
    pytest.param("x = ' ' * (2**40)", marks=pytest.mark.slow),
], ids=["one-huge-allocation", "growing", "huge-string"])
def test_memory_bomb_is_stopped(sandbox: Sandbox, program: str) -> None:
    box = Sandbox(**{**LIMITS, "timeout_s": 10.0, "cpu_s": 10.0})  # the memory limit must be what stops it
    result = box.run(program)
    assert result.status is ExecStatus.MEMORY, (result.status, result.stderr[-300:])
    assert "MemoryError" in result.stderr


@pytest.mark.parametrize("program", [
    "while True:\n    print('x' * 10000)",
    pytest.param("import sys\nwhile True:\n    sys.stderr.write('y' * 10000)", marks=pytest.mark.slow),
    pytest.param("import os\nwhile True:\n    os.write(1, b'z' * 65536)", marks=pytest.mark.slow),
    pytest.param("print('w' * (50 << 20), end='')", marks=pytest.mark.slow),
], ids=["stdout", "stderr", "raw-fd", "one-line"])
def test_huge_output_is_capped(sandbox: Sandbox, program: str) -> None:
    start = time.monotonic()
    result = sandbox.run(program)
    assert result.status is ExecStatus.OUTPUT_LIMIT, result.status
    assert len(result.stdout.encode()) <= LIMITS["max_output_bytes"]
    assert len(result.stderr.encode()) <= sandbox_module.STDERR_TAIL_BYTES
    assert time.monotonic() - start < LIMITS["timeout_s"] + SLACK_S


def test_many_files_are_stopped(sandbox: Sandbox) -> None:
    result = sandbox.run("i = 0\nwhile True:\n    open('/tmp/f%d' % i, 'w').close()\n    i += 1\n")
    assert result.status is ExecStatus.OUTPUT_LIMIT, result
    assert sandbox.run("import os\nprint(len(os.listdir('/tmp')))").stdout == "1\n"  # a fresh /tmp: solution.py


@pytest.mark.parametrize(("program", "error"), [
    ("f = open('/tmp/big', 'wb')\nfor _ in range(64):\n    f.write(b'x' * (1 << 20))\n    f.flush()", "File too large"),
    pytest.param("for i in range(16):\n    with open(f'/tmp/big{i}', 'wb') as f:\n        for _ in range(15):\n"
                 "            f.write(b'x' * (1 << 20))", "No space left on device", marks=pytest.mark.slow),
], ids=["file-size", "tmpfs-size"])
def test_file_size_and_tmpfs_size_are_limited(sandbox: Sandbox, program: str, error: str) -> None:
    result = sandbox.run(program)
    assert result.status is ExecStatus.RUNTIME_ERROR and error in result.stderr, (result.status, result.stderr)


# ------------------------------------------------------------------------------------------------ snooping

def test_proc_shows_no_host_process_nor_its_environment(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "RAGEN-SECRET-" + secrets.token_hex(8)
    monkeypatch.setenv("RAGEN_SANDBOX_SECRET", token)
    program = PROBE_HELPERS + '''
out = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
blobs = {}
for pid in out["pids"]:
    for name in ("environ", "cmdline", "status", "maps"):
        blobs[f"{pid}/{name}"] = attempt(lambda: open(f"/proc/{pid}/{name}", "rb").read())
out["blobs"] = blobs
out["init_fds"] = attempt(lambda: os.listdir("/proc/1/fd"))
out["init_mem"] = attempt(lambda: open("/proc/1/mem", "rb").read(1))
print(json.dumps(out))
'''
    result = sandbox.run(program)
    out = report(result)
    assert len(out["pids"]) <= 4 and max(out["pids"]) < 100, out["pids"]
    assert token not in result.stdout and "pytest" not in result.stdout
    assert out["blobs"]["1/environ"].startswith("ERR PermissionError")
    assert out["init_fds"].startswith("ERR PermissionError") and out["init_mem"].startswith("ERR PermissionError")


def test_environment_variables_do_not_leak(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "RAGEN-SECRET-" + secrets.token_hex(8)
    monkeypatch.setenv("RAGEN_SANDBOX_SECRET", token)
    monkeypatch.setenv("HF_TOKEN", token)
    result = sandbox.run("import os, json\nprint(json.dumps(dict(os.environ)))")
    env = report(result)
    assert set(env) <= {"PATH", "LANG", "HOME", "LD_LIBRARY_PATH", "LC_CTYPE", "PWD"}, env
    assert token not in result.stdout


# ------------------------------------------------------------------------------------------------ low-level tricks

def test_ctypes_tricks_fail(sandbox: Sandbox) -> None:
    program = PROBE_HELPERS + '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
out = {
    "unshare_user": libc.unshare(0x10000000),
    "unshare_mount": libc.unshare(0x00020000),
    "mount": libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
    "chroot": libc.chroot(b"/tmp"),
    "setuid0": libc.setuid(0),
    "ptrace_init": libc.ptrace(16, 1, 0, 0),
    "reboot": libc.reboot(0x4321FEDC),
    "sethostname": libc.sethostname(b"pwned", 5),
}
print(json.dumps(out), flush=True)
ctypes.string_at(0)
'''
    result = sandbox.run(program)
    out = report(result)
    assert all(value == -1 for value in out.values()), out
    assert result.status is ExecStatus.KILLED and result.returncode == -11
    assert sandbox.run("import os\nprint(os.getuid())").stdout == PROGRAM_UID + "\n"


def test_no_capabilities_and_no_new_privileges(sandbox: Sandbox) -> None:
    result = sandbox.run("print(open('/proc/self/status').read())")
    fields = dict(line.split(":\t", 1) for line in result.stdout.splitlines() if ":\t" in line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields[cap])
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Uid"].split()[:2] == [PROGRAM_UID, PROGRAM_UID]


# ------------------------------------------------------------------------------------------------ forged results

FORGERIES = {
    "fake-report": "import sys\nsys.stdout.write('0' * 32 + '{\"outcomes\": []}\\n')\ndef f(x):\n    return 0",
    "exit-on-load": "import sys\nsys.exit(0)\ndef f(x):\n    return 0",
    "always-equal": "class Yes(int):\n    def __eq__(self, other):\n        return True\n"
                    "    __hash__ = int.__hash__\ndef f(x):\n    return Yes(0)",
    "kill-supervisor": "import os, signal\ndef f(x):\n    for pid in (1, os.getppid()):\n"
                       "        try:\n            os.kill(pid, signal.SIGKILL)\n        except OSError:\n"
                       "            pass\n    return 0",
    "write-supervisor-stdout": "def f(x):\n    fd = os.open('/proc/1/fd/1', os.O_WRONLY)\n"
                               "    os.write(fd, b'forged')\n    return x * x + 1\nimport os",
    "read-supervisor": "def f(x):\n    return open('/proc/1/environ').read() + open('/proc/1/cmdline').read()",
    "raise-systemexit": "def f(x):\n    raise SystemExit(0)",
    "exit-process": "import os\ndef f(x):\n    os._exit(0)",
    "patch-assert": "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\ndef f(x):\n    return -1",
    "return-code-object": "def f(x):\n    return [f.__code__, {1: (f.__code__,)}]",
}


FORGERY_TESTS = [CallTest((2,), 5), CallTest((3,), 10), CodeTest("assert candidate(4) == 17"),
                 CodeTest("assert candidate(0) == 1")]
FAST_FORGERIES = ("fake-report", "always-equal", "kill-supervisor", "write-supervisor-stdout")


def check_forgeries(sandbox: Sandbox, names: list[str]) -> None:
    futures = {name: sandbox.submit(sandbox.run_function_tests, FORGERIES[name], "f", FORGERY_TESTS)
               for name in names}
    good = sandbox.run_function_tests("def f(x):\n    return x * x + 1", "f", FORGERY_TESTS)
    assert good.passed == 4, good
    for name, future in futures.items():
        result = future.result()
        assert result.passed == 0, (name, result)


def test_forged_results_score_nothing(sandbox: Sandbox) -> None:
    check_forgeries(sandbox, list(FAST_FORGERIES))


@pytest.mark.slow
def test_all_forgeries_score_nothing(sandbox: Sandbox) -> None:
    check_forgeries(sandbox, sorted(set(FORGERIES) - set(FAST_FORGERIES)))


# ------------------------------------------------------------------------------------------------ function tests

def test_function_tests_statuses(sandbox: Sandbox) -> None:
    program = '''
import time
def f(x):
    if x == 1:
        raise ValueError("bad one")
    if x == 2:
        while True:
            pass
    if x == 3:
        return bytearray(10**10)
    if x == 4:
        return object()
    return [x, (x, x)]
'''
    tests = [CallTest((1,), 0), CallTest((2,), 0), CallTest((3,), 0), CallTest((4,), 0), CallTest((5,), [5, [5, 5]]),
             CodeTest("assert candidate(6) == [6, (6, 6)]"), CodeTest("import math", counted=False),  # tuples kept
             CodeTest("assert math.isclose(len(candidate(7)), 2)")]
    report_ = sandbox.run_function_tests(program, "f", tests)
    statuses = [(o.passed, o.status) for o in report_.outcomes]
    assert statuses == [(False, ExecStatus.RUNTIME_ERROR), (False, ExecStatus.TIMEOUT), (False, ExecStatus.MEMORY),
                        (False, ExecStatus.RUNTIME_ERROR), (True, ExecStatus.OK), (True, ExecStatus.OK),
                        (True, ExecStatus.OK)], report_
    assert "ValueError: bad one" in report_.outcomes[0].detail


def test_function_tests_leetcode_style_and_load_errors(sandbox: Sandbox) -> None:
    program = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    good = sandbox.run_function_tests(program, "twoSum", [CallTest(([2, 7], 9), [0, 1]), CallTest(([1], 1), [[0, 1]])])
    assert good.passed == 2
    broken = sandbox.run_function_tests("def twoSum(:\n", "twoSum", [CallTest((1,), 1), CallTest((2,), 2)])
    assert broken.passed == 0 and "SyntaxError" in broken.load_error
    missing = sandbox.run_function_tests("x = 1\n", "twoSum", [CallTest((1,), 1)])
    assert missing.passed == 0 and "defines no function" in missing.load_error


def test_call_results_compare_loosely_but_not_wrongly(sandbox: Sandbox) -> None:
    program = "def f(k):\n    return {0: (1, 2), 1: 0.1 + 0.2, 2: True, 3: 1, 4: [[1]], 5: None}[k]\n"
    tests = [CallTest((0,), [1, 2]), CallTest((1,), 0.3), CallTest((2,), 1), CallTest((3,), True),
             CallTest((4,), [1]), CallTest((5,), None), CallTest((3,), 1.0)]
    outcomes = [o.passed for o in sandbox.run_function_tests(program, "f", tests).outcomes]
    assert outcomes == [True, True, False, False, False, True, True]


# ------------------------------------------------------------------------------------------------ pool, stdio

def test_pool_runs_in_order_and_in_parallel(sandbox: Sandbox) -> None:
    programs = [f"import time\ntime.sleep(0.2)\nprint({i})" for i in range(4)]
    start = time.monotonic()
    results = sandbox.map(programs)
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
    assert time.monotonic() - start < 4 * 0.2 + 4 * 0.5 + SLACK_S
    future = sandbox.submit(sandbox.run, "print(input()[::-1])", "abc")
    assert future.result().stdout == "cba\n"


def test_run_stdio_feeds_each_input_to_a_fresh_process(sandbox: Sandbox) -> None:
    program = "import os, sys\ndata = sys.stdin.read()\nopen('/tmp/count', 'a').write('x')\nprint(data.upper())"
    inputs = [f"line {i}\n" for i in range(9)]
    results = sandbox.run_stdio(program, inputs)
    assert [r.stdout for r in results] == [f"LINE {i}\n\n" for i in range(9)]
    assert sandbox.run("print(exit)\nexit(3)").returncode == 3
    assert sandbox.run("print(__name__)").stdout == "__main__\n"


def test_outputs_match_rules() -> None:
    assert outputs_match("1 2\n3\n", "1 2\n3")
    assert outputs_match("a  \r\nb\n\n\n", "a\nb")
    assert outputs_match("\n\nx\n", "x\n")
    assert outputs_match("0.3333333333", "0.333333")
    assert outputs_match("1 2", "1\n2")
    assert not outputs_match("1 2", "1 3")
    assert not outputs_match("0.33", "0.333333")
    assert not outputs_match("x", "x y")
    assert not outputs_match("nan", "nan ") or outputs_match("nan", "nan")
    assert not outputs_match("inf", "1e999")
    assert not outputs_match(None, "x")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ modes and config

def test_command_line_has_the_isolation_flags() -> None:
    for as_root in (True, False):
        cmd = bwrap_command(SandboxConfig(), as_root=as_root)
        joined = " ".join(cmd)
        for flag in ("--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--ro-bind /usr /usr",
                     "--tmpfs /tmp", "--remount-ro /", "--remount-ro /dev", "--proc /proc"):
            assert flag in joined, (as_root, flag)
        if as_root:
            assert "--userns {USERNS} --unshare-pid --unshare-net --unshare-ipc --unshare-uts" in joined
            assert "--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID" in joined
        else:
            assert "--unshare-all --unshare-user --disable-userns --uid 65534 --gid 65534 --cap-drop ALL" in joined
        assert "--share-net" not in joined and "--bind " not in joined


def test_missing_bubblewrap_refuses_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "_PROBES", {})
    monkeypatch.setattr(probe_module, "bwrap_path", lambda: None)
    with pytest.raises(SandboxUnavailableError, match=r"bubblewrap.*apt-get install -y bubblewrap.*unsafe_subprocess"):
        Sandbox().check()
    with pytest.raises(SandboxUnavailableError):
        Sandbox().run("print(1)")
    assert not sandbox_module.bwrap_available()


def test_unsafe_mode_is_an_explicit_loud_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_module, "bwrap_path", lambda: None)
    with pytest.warns(RuntimeWarning, match="WITHOUT namespaces"):
        box = Sandbox(mode="unsafe_subprocess", timeout_s=0.5, cpu_s=1.0)
    assert box.run("print(sum(range(10)))").stdout == "45\n"
    assert box.run("while True:\n    pass").status is ExecStatus.TIMEOUT
    assert box.run("print(input())", "hi").stdout == "hi\n"
    assert box.run_function_tests("def f(x):\n    return x + 1", "f", [CallTest((1,), 2)]).passed == 1


@pytest.mark.parametrize(("options", "field"), [
    ({"mode": "docker"}, "mode"), ({"timeout_s": 0}, "timeout_s"), ({"cpu_s": float("nan")}, "cpu_s"),
    ({"memory_mb": 8}, "memory_mb"), ({"max_procs": 1}, "max_procs"), ({"max_open_files": 3}, "max_open_files"),
    ({"workers": -1}, "workers"), ({"max_output_bytes": 0}, "max_output_bytes"),
])
def test_bad_sandbox_config(options: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"'{field}' must be "):
        SandboxConfig(**options)


@pytest.mark.parametrize(("options", "message"), [
    ({"timeout_s": -1}, r"'timeout_s' must be a (finite )?number > 0: -1"),
    ({"memory_mb": 8}, r"'memory_mb' must be an integer >= 64 \(the interpreter needs it\): 8"),
    ({"max_files": True}, r"'max_files' must be an integer >= 1: True"),
    ({"workers": -1}, r"'workers' must be an integer >= 0 \(0: one per CPU, at most 8\): -1"),
    ({"mode": "docker"}, r"'mode' must be one of 'bwrap', 'unsafe_subprocess': 'docker'"),
])
def test_sandbox_config_messages_name_the_constraint(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SandboxConfig(**options)


# ------------------------------------------------------------------ memory the address-space limit does not see,
# and the supervisor's own process (issue #14: System V shared memory and memfd each held ~1.5 GB past a 1 GB
# limit; a program sharing the supervisor's uid lowered its rlimits and stormed it with SIGALRM)

MEMORY_PROBE = PROBE_HELPERS + '''
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
def shm():
    ids = []
    for _ in range(3):
        ident = libc.shmget(0, 512 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if ident < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        address = libc.shmat(ident, None, 0)
        ctypes.memset(address, 1, 512 << 20)
        ids.append(ident)
    return len(ids)
def memfd():
    fds = []
    for _ in range(50):
        fd = os.memfd_create("hog")
        os.write(fd, b"x" * (15 << 20))
        fds.append(fd)
    return len(fds)
def msgq():
    ident = libc.msgget(0, 0o1000 | 0o600)
    if ident < 0:
        raise OSError(ctypes.get_errno(), "msgget")
    return ident
def shared_anonymous():
    # counted by the address-space limit (256 MiB here): a 1 GiB shared mapping cannot be made
    return len(mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS))
print(json.dumps({"shm": attempt(shm), "memfd": attempt(memfd), "msg": attempt(msgq),
                  "shared": attempt(shared_anonymous)}))
'''


def test_memory_outside_the_address_space_limit_cannot_be_allocated(sandbox: Sandbox) -> None:
    out = report(sandbox.run(MEMORY_PROBE))
    assert out["shm"].startswith("ERR") and "[Errno 1]" in out["shm"], out
    assert out["memfd"].startswith("ERR") and "[Errno 1]" in out["memfd"], out
    assert out["msg"].startswith("ERR") and "[Errno 1]" in out["msg"], out
    assert out["shared"].startswith("ERR"), out
    assert sandbox.run("print(6 * 7)").stdout == "42\n"


def test_two_processes_cannot_pile_up_memfd_memory(sandbox: Sandbox) -> None:
    program = PROBE_HELPERS + '''
def hog():
    fds = []
    for _ in range(50):
        fd = os.memfd_create("hog")
        os.write(fd, b"x" * (15 << 20))
        fds.append(fd)
    return len(fds)
pid = os.fork()
result = attempt(hog)
if pid == 0:
    os._exit(0 if result.startswith("ERR") else 3)
_, status = os.waitpid(pid, 0)
print(json.dumps({"parent": result, "child_refused": os.WEXITSTATUS(status) == 0}))
'''
    out = report(sandbox.run(program))
    assert out["parent"].startswith("ERR") and out["child_refused"], out


def test_the_program_cannot_touch_the_supervisor(sandbox: Sandbox) -> None:
    program = PROBE_HELPERS + '''
import resource, signal, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def status_uid(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return int(line.split()[1])
out = {"uid": os.getuid(), "supervisor_uid": status_uid(1)}
out["prlimit"] = attempt(lambda: resource.prlimit(1, resource.RLIMIT_CPU, (1, 1)))
out["prlimit_as"] = attempt(lambda: resource.prlimit(1, resource.RLIMIT_AS, (1 << 20, 1 << 20)))
out["alarm"] = attempt(lambda: os.kill(1, signal.SIGALRM))
# the kernel reads a pid_t (32 bits): a raw system call with high bits set must not slip past the filter
out["raw_kill"] = attempt(lambda: (libc.syscall(62, ctypes.c_long(1 | (1 << 32)), signal.SIGALRM), ctypes.get_errno()))
out["pidfd"] = attempt(lambda: os.pidfd_open(1))
out["broadcast"] = attempt(lambda: os.kill(-1, signal.SIGALRM))
out["own_limit"] = attempt(lambda: resource.setrlimit(resource.RLIMIT_CPU, (1, 1)))
print(json.dumps(out))
'''
    result = sandbox.run(program)
    out = report(result)
    for key in ("prlimit", "prlimit_as", "alarm", "pidfd", "broadcast"):
        assert out[key].startswith("ERR") and "[Errno 1]" in out[key], (key, out)
    assert out["raw_kill"] == "OK (-1, 1)", out  # EPERM from the filter, not a delivered signal
    assert out["own_limit"] == "OK None", out  # its own limits stay its own to lower
    if os.geteuid() == 0:
        # started by root, the program has a uid of its own, so the kernel refuses it even without the filter
        assert out["uid"] == bwrap_module.PROGRAM_UID != out["supervisor_uid"] == bwrap_module.SANDBOX_UID
    # the supervisor kept its limits: a later program still gets its full time and memory
    assert sandbox.run("x = bytearray(64 << 20)\nprint(len(x))").stdout == str(64 << 20) + "\n"


def test_a_signal_storm_does_not_turn_wrong_answers_into_kills(sandbox: Sandbox) -> None:
    program = '''
import os, signal
def f(x):
    if os.fork() == 0:
        for _ in range(20000):
            for target in (1, -1):
                try:
                    os.kill(target, signal.SIGALRM)
                except OSError:
                    pass
        os._exit(0)
    os.wait()
    return -1
'''
    tests = [CallTest((i,), i) for i in range(4)]
    result = sandbox.run_function_tests(program, "f", tests)
    assert [(o.passed, o.status, o.detail) for o in result.outcomes] == [(False, ExecStatus.OK, "wrong answer")] * 4


def test_the_filter_is_a_real_seccomp_program() -> None:
    program = sandbox_module.seccomp_filter(1)
    assert program and len(program) % 8 == 0  # struct sock_filter: 8 bytes per instruction
    assert sandbox_module.seccomp_filter(1) == program  # deterministic
    assert sandbox_module.seccomp_filter(4242) != program  # it names the supervisor's pid


# ------------------------------------------------------------------ the run's memory cgroup (where one can be made)

def _skip_without_cgroup() -> None:
    if cgroups_module.cgroup_parent() is None:
        pytest.skip("this process may not make memory cgroups here (no delegated cgroup)")


def test_processes_of_one_run_share_one_memory_bound() -> None:
    _skip_without_cgroup()
    sandbox = Sandbox(**{**LIMITS, "timeout_s": 15.0, "cpu_s": 10.0})  # reclaim before the kill can take a while
    _skip_without_bwrap(sandbox)
    # 4 x 200 MiB, each under the 256 MiB address-space limit, but together past the run's 576 MiB
    program = '''
import os, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(200 << 20)
        time.sleep(0.3)
        os._exit(0)
    kids.append(pid)
print(sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == -9 for pid in kids))
'''
    assert sandbox.config.total_memory_bytes == (2 * 256 + 64) << 20
    result = sandbox.run(program)
    assert result.status is ExecStatus.OK, result
    assert int(result.stdout) >= 1  # the kernel killed at least one of them
    left = [name for name in os.listdir(cgroups_module.cgroup_parent()[1]) if name.startswith("ragen-sandbox-")]
    assert left == []  # each run's cgroup is removed with it


def test_a_program_killed_by_the_run_memory_bound_is_a_memory_failure() -> None:
    _skip_without_cgroup()
    box = Sandbox(**{**LIMITS, "total_memory_mb": 96, "timeout_s": 15.0, "cpu_s": 10.0})
    _skip_without_bwrap(box)
    result = box.run("block = bytearray(200 << 20)\nprint(len(block))")
    assert result.status is ExecStatus.MEMORY and result.stdout == "", result
    report_ = box.run_function_tests("def f(x):\n    block = bytearray(200 << 20)\n    return x", "f",
                                     [CallTest((1,), 1)])
    assert report_.outcomes[0].status is ExecStatus.MEMORY, report_
    assert box.run("print(6 * 7)").stdout == "42\n"


def test_the_memory_bound_is_a_config_key() -> None:
    assert SandboxConfig(memory_mb=100, tmp_size_mb=10).total_memory_bytes == 210 << 20
    assert SandboxConfig(total_memory_mb=300).total_memory_bytes == 300 << 20
    with pytest.raises(ValueError, match="total_memory_mb"):
        SandboxConfig(total_memory_mb=-1)
