"""The sandbox's supervisor: trusted code that runs *inside* the sandbox, never in ragen's process.

The host (:mod:`ragen_plugins_envs.sandbox`) reads this file with ``importlib.resources`` and runs it as
``python -I -S -B -c <this source>`` as pid 1 of the sandbox's pid namespace; nothing of ragen is importable there,
so it uses the standard library only. It reads one JSON job from stdin, runs the program once per test in a forked
child (rlimits, the seccomp filter and the program's uid set in the child before exec; the child runs
:mod:`ragen_plugins_envs.sandbox.child`, whose source comes in the job), and prints ``nonce + JSON`` on stdout.

It is a module like any other so that linters, tests and readers can check it; importing it runs nothing (``main``
runs only as ``__main__``), and no module of ragen imports it (``tests/test_meta.py``).
"""

import ctypes
import fcntl
import json
import marshal
import os
import resource
import select
import signal
import struct
import sys
import time

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_KEEPCAPS, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 1, 4, 8, 22, 38
_SECCOMP_MODE_FILTER = 2
# what the supervisor keeps when the program gets a uid of its own: switching the program to it, and killing it
_SUPERVISOR_CAPS = (1 << 5) | (1 << 6) | (1 << 7)  # CAP_KILL, CAP_SETGID, CAP_SETUID
_LIBC = None
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
    _LIBC = None


def _prctl(option, value):
    if _LIBC is not None:
        _LIBC.prctl(option, value, 0, 0, 0)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capset(mask):
    # effective = permitted = mask (capabilities 0..31), inheritable none
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = mask
    return _LIBC.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) if _LIBC is not None else -1


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp_loader(program):
    # the host's filter (classic BPF, 8 bytes per instruction), installed in a forked child before exec; the
    # buffer is made here, in the supervisor, so the child only makes two prctl calls
    if not program:
        return None
    if _LIBC is None:
        raise SystemExit("the sandbox cannot install its seccomp filter (no libc through ctypes)")
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.addressof(buf))

    def load():
        if (_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                or _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0):
            os.write(2, b"sandbox: could not install the seccomp filter\n")
            os._exit(126)
    load.keep = (buf, fprog)
    return load


class _Failure(BaseException):
    def __init__(self, status, detail=""):
        BaseException.__init__(self, status, detail)
        self.status, self.detail = status, detail


class _UnitTimeout(BaseException):
    pass


_ALARM_AT = [float("inf")]


def _alarm(_signum, _frame):
    # a SIGALRM before the timer's time was sent by someone else (a program that shares the supervisor's uid): ignore
    if time.monotonic() >= _ALARM_AT[0] - 0.05:
        raise _UnitTimeout()


def _reap_orphans():
    while True:
        try:
            pid, _st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class Runner:
    def __init__(self, job):
        self.job = job
        self.child_source = job["child"]
        self.python = job["python"]
        self.workdir = job["workdir"]
        self.env = dict(job["env"])
        self.limits = job["limits"]
        self.timeout = float(job["timeout_s"])
        self.cap = int(job["max_output_bytes"])
        self.max_files = int(job["max_files"]) if job.get("count_files") else 0
        self.program_uid = job.get("program_uid")
        self.seccomp = _seccomp_loader(bytes.fromhex(job.get("seccomp") or ""))
        self.path = os.path.join(self.workdir, "solution.py")
        with open(self.path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(job["program"])
        os.chmod(self.path, 0o444)
        self.base_files = self._files()

    def _files(self):
        if not self.max_files:
            return 0
        try:
            st = os.statvfs(self.workdir)
        except OSError:
            return 0
        return st.f_files - st.f_ffree

    def too_many_files(self):
        return bool(self.max_files) and self._files() - self.base_files > self.max_files

    def spawn(self, argv, stdin_fd, stdout_fd, stderr_fd, extra=()):
        # copies at fd >= 8 (close-on-exec), so the dup2 onto 0..n-1 below cannot overwrite a source
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 8) for fd in (stdin_fd, stdout_fd, stderr_fd) + tuple(extra)]
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                if self.program_uid is not None:
                    # the program's own user, without the supervisor's capabilities (before PDEATHSIG: a change
                    # of credentials clears it)
                    uid = int(self.program_uid)
                    os.setgroups([])
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    if _capset(0) != 0 or os.getuid() != uid:
                        os._exit(126)
                _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
                for target, fd in enumerate(high):
                    os.dup2(fd, target)
                os.closerange(len(high), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                cpu = int(self.limits["cpu"])
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                if self.seccomp is not None:
                    self.seccomp()
                os.execve(self.python, argv, self.env)
            finally:
                os._exit(127)
        for fd in high:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        return pid

    # -------------------------------------------------------------------- stdin/stdout programs
    def run_stdio(self, text):
        data = text.encode("utf-8", "surrogatepass")
        try:
            stdin_fd = os.memfd_create("stdin")
        except (AttributeError, OSError):
            stdin_fd = os.open(os.path.join(self.workdir, ".stdin"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(stdin_fd, view):]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        boot = ("import builtins, sys\n"
                "def _exit(code=None):\n    raise SystemExit(code)\n"
                "builtins.exit = builtins.quit = _exit\n"
                "sys.argv = [sys.argv[1]]\n"
                "with open(sys.argv[0], encoding='utf-8', errors='surrogatepass') as f:\n    src = f.read()\n"
                "del f, _exit\n"
                "code = compile(src, sys.argv[0], 'exec')\n"
                "del src\n"
                "exec(code, {'__name__': '__main__', '__file__': sys.argv[0], '__builtins__': builtins})\n")
        start = time.monotonic()
        pid = self.spawn([self.python, "-I", "-S", "-B", "-c", boot, self.path], stdin_fd, out_w, err_w)
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        result = self.collect(pid, out_r, err_r, start + self.timeout)
        result["wall_s"] = time.monotonic() - start
        return result

    def collect(self, pid, out_r, err_r, deadline):
        bufs = {out_r: bytearray(), err_r: bytearray()}
        totals = {out_r: 0, err_r: 0}
        open_fds = {out_r, err_r}
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        status, usage, exited_at, reason = None, None, None, ""
        while True:
            now = time.monotonic()
            if status is None:
                wpid, st, ru = os.wait4(pid, os.WNOHANG)
                if wpid:
                    status, usage, exited_at = st, ru, now
            if status is not None and (not open_fds or now - exited_at > 0.05):
                break
            if now >= deadline:
                reason = "timeout"
                break
            if self.too_many_files():
                reason = "files"
                break
            watch = list(open_fds)
            if status is None and pidfd is not None:
                watch.append(pidfd)
            wait = min(deadline - now, 0.02 if (self.max_files or pidfd is None or status is not None) else 1.0)
            ready = select.select(watch, [], [], max(wait, 0.0))[0] if watch else time.sleep(max(wait, 0.0)) or []
            for fd in ready:
                if fd == pidfd:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.discard(fd)
                    continue
                totals[fd] += len(chunk)
                buf = bufs[fd]
                buf += chunk
                if fd == err_r and len(buf) > 4 * 4096:
                    del buf[:-4096]
                if totals[fd] > self.cap:
                    reason = "output"
            if reason:
                break
        _kill_group(pid)
        if status is None:
            _wpid, status, usage = os.wait4(pid, 0)
        for fd in (out_r, err_r) + ((pidfd,) if pidfd is not None else ()):
            os.close(fd)
        _reap_orphans()
        out = bytes(bufs[out_r][: self.cap]).decode("utf-8", "replace")
        err = bytes(bufs[err_r][-4096:]).decode("utf-8", "replace")
        verdict = self.classify(status, usage, reason, err)
        # a limit's signal (SIGXCPU, SIGXFSZ, the CPU limit's SIGKILL) is no exit status, like the wall clock's kill
        on_limit = reason or (os.WIFSIGNALED(status) and verdict in ("timeout", "output_limit"))
        return {"status": verdict, "stdout": out, "stderr": err,
                "returncode": None if on_limit else _returncode(status)}

    def classify(self, status, usage, reason, err):
        if reason == "timeout":
            return "timeout"
        if reason in ("output", "files"):
            return "output_limit"
        cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= float(self.limits["cpu"]) - 0.05):
                return "timeout"
            if sig == signal.SIGXFSZ:
                return "output_limit"
            if _memory_error(err):
                return "memory"
            return "killed"
        if os.WEXITSTATUS(status) == 0:
            return "ok"
        if _memory_error(err):
            return "memory"
        return "runtime_error"

    # -------------------------------------------------------------------- function-call programs
    def run_function(self):
        job = self.job
        tests_ns = {"__name__": "__tests__"}
        code = compile(job["test_prelude"], "<test prelude>", "exec")
        exec(code, tests_ns)
        candidate = Candidate(self, job["entry"], job.get("method_class") or "Solution")
        tests_ns["candidate"] = candidate
        signal.signal(signal.SIGALRM, _alarm)
        outcomes = []
        for unit in job["tests"]:
            start = time.monotonic()
            candidate.deadline = start + self.timeout
            passed, status, detail = False, "ok", ""
            _ALARM_AT[0] = time.monotonic() + self.timeout + 1.0
            signal.setitimer(signal.ITIMER_REAL, self.timeout + 1.0)
            try:
                if "code" in unit:
                    exec(compile(unit["code"], "<test>", "exec"), tests_ns)
                    passed = True
                else:
                    value = candidate(*unit["args"])
                    passed = _matches(value, unit["expected"])
                    detail = "" if passed else "wrong answer"
            except AssertionError:
                detail = "wrong answer"
            except _Failure as failure:
                status, detail = failure.status, failure.detail
            except _UnitTimeout:
                status, detail = "timeout", "test exceeded the time limit"
                candidate.stop()
            except BaseException as exc:
                status, detail = "runtime_error", _describe(exc)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                _ALARM_AT[0] = float("inf")
            if unit.get("counted", True):
                outcomes.append({"passed": bool(passed), "status": status, "detail": detail[:300],
                                 "wall_s": time.monotonic() - start})
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        candidate.stop()
        return {"outcomes": outcomes, "load_error": candidate.load_error}


class Candidate:
    """Calls the program's function in a separate child; only arguments in, only marshal-able values out."""

    def __init__(self, runner, entry, method_class):
        self.runner, self.entry, self.method_class = runner, entry, method_class
        self.pid = None
        self.deadline = 0.0
        self.load_error = ""
        self.failures = 0
        self.last_failure = ("killed", "")

    def start(self):
        if self.load_error:
            raise _Failure("runtime_error", self.load_error)
        if self.failures >= 3:
            raise _Failure(*self.last_failure)
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        null = os.open(os.devnull, os.O_RDWR)
        self.pid = self.spawn_child(null, req_r, resp_w)
        for fd in (null, req_r, resp_w):
            os.close(fd)
        tag, value = self.receive(time.monotonic() + self.runner.timeout)
        if tag == "load_error":
            self.load_error = "the program failed to load: " + str(value)[:300]
            self.stop()
            raise _Failure("runtime_error", self.load_error)

    def spawn_child(self, null, req_r, resp_w):
        boot = self.runner.child_source
        argv = [self.runner.python, "-I", "-S", "-B", "-c", boot, self.runner.path, self.entry, self.method_class]
        return self.runner.spawn(argv, null, null, null, extra=(req_r, resp_w))

    def stop(self):
        if self.pid is None:
            return
        _kill_group(self.pid)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pid = None
        _reap_orphans()

    def fail(self, status, detail):
        self.failures += 1
        self.last_failure = (status, detail)
        self.stop()
        raise _Failure(status, detail)

    def died(self):
        pid = self.pid
        _kill_group(pid)
        _wpid, st, usage = os.wait4(pid, 0)
        self.pid = None
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        _reap_orphans()
        status = self.runner.classify(st, usage, "", "")
        if status == "ok" or status == "runtime_error":
            status = "killed"
        self.failures += 1
        self.last_failure = (status, "the program's process ended (" + _describe_status(st) + ")")
        raise _Failure(*self.last_failure)

    def send(self, payload):
        data = memoryview(struct.pack(">I", len(payload)) + payload)
        while data:
            now = time.monotonic()
            if now >= self.deadline:
                self.fail("timeout", "the call exceeded the time limit")
            if not select.select([], [self.req_w], [], min(self.deadline - now, 0.02))[1]:
                continue
            try:
                data = data[os.write(self.req_w, data[:65536]):]
            except (BrokenPipeError, OSError):
                self.died()

    def read_exact(self, n, deadline):
        buf = bytearray()
        while len(buf) < n:
            now = time.monotonic()
            if now >= deadline:
                self.fail("timeout", "the call exceeded the time limit")
            if self.runner.too_many_files():
                self.fail("output_limit", "too many files")
            if not select.select([self.resp_r], [], [], min(deadline - now, 0.02))[0]:
                continue
            chunk = os.read(self.resp_r, min(n - len(buf), 1 << 20))
            if not chunk:
                self.died()
            buf += chunk
        return bytes(buf)

    def receive(self, deadline):
        (size,) = struct.unpack(">I", self.read_exact(4, deadline))
        if size > self.runner.cap:
            self.fail("output_limit", "the result is larger than the output limit")
        try:
            tag, value = marshal.loads(self.read_exact(size, deadline))
        except _Failure:
            raise
        except Exception:
            self.fail("runtime_error", "malformed reply from the program's process")
        if not isinstance(tag, str) or _holds_code(value):
            self.fail("runtime_error", "malformed reply from the program's process")
        return tag, value

    def __call__(self, *args, **kwargs):
        if self.pid is None:
            self.start()
        try:
            payload = marshal.dumps((args, kwargs))
        except Exception as exc:
            raise _Failure("runtime_error", "the arguments are not builtin values: " + _describe(exc)) from None
        self.send(payload)
        tag, value = self.receive(self.deadline)
        if tag == "ok":
            return value
        text = str(value)
        if tag == "error":
            raise _Failure("memory" if text.startswith("MemoryError") else "runtime_error", text[:300])
        self.fail("runtime_error", "malformed reply from the program's process")




def _holds_code(value):
    # marshal can carry code objects; no honest result holds one, and the tests must never receive one
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is _CODE:
            return True
        if type(item) in (list, tuple, set, frozenset):
            stack.extend(item)
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
    return False


_CODE = type(_holds_code.__code__)


def _memory_error(err):
    tail = err.strip().splitlines()[-1:] if err.strip() else []
    return any(line.startswith("MemoryError") for line in tail) or "Cannot allocate memory" in err or (
        "out of memory" in err.lower())


def _returncode(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _describe_status(status):
    if os.WIFSIGNALED(status):
        try:
            return "killed by " + signal.Signals(os.WTERMSIG(status)).name
        except ValueError:
            return "killed by signal " + str(os.WTERMSIG(status))
    return "exit status " + str(os.WEXITSTATUS(status))


def _describe(exc):
    try:
        text = str(exc)
    except BaseException:
        text = ""
    return type(exc).__name__ + (": " + text[:300] if text else "")


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _close(a, b):
    if type(a) is bool or type(b) is bool:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (isinstance(a, int) and isinstance(b, int)):
            return a == b  # equal infinities too: inf - inf is nan, which no tolerance accepts
        try:
            return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
        except OverflowError:
            return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _matches(value, expected):
    value, expected = _plain(value), _plain(expected)
    if _close(value, expected):
        return True
    return isinstance(expected, list) and len(expected) == 1 and _close(value, expected[0])


def _own_limits(limits):
    mem = int(limits["memory_mb"]) << 20
    pairs = [(resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, int(limits["max_file_mb"]) << 20),
             (resource.RLIMIT_NOFILE, int(limits["max_open_files"])), (resource.RLIMIT_CORE, 0),
             (resource.RLIMIT_CPU, int(limits["supervisor_cpu"]))]
    if limits["max_procs"]:
        pairs.append((resource.RLIMIT_NPROC, int(limits["max_procs"])))
    for which, value in pairs:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def _drop_to(uid, keep=0):
    # bwrap (run by root) left CAP_SETUID/CAP_SETGID (and CAP_KILL) only: become the unprivileged sandbox user and
    # keep the capabilities in ``keep`` (those the program's own uid needs: switching to it, killing it), none
    # inheritable; without ``keep`` no capability survives the uid change
    os.setgroups([])
    if keep:
        _prctl(_PR_SET_KEEPCAPS, 1)
    os.setgid(uid)
    os.setuid(uid)
    if _capset(keep) != 0 and (keep or _LIBC is not None):
        raise SystemExit("could not set the supervisor's capabilities")
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != uid:
        raise SystemExit("could not become the sandbox user")


def main():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raw = sys.stdin.buffer.read()
    job = json.loads(raw)
    del raw
    if job.get("drop_to") is not None:
        _drop_to(int(job["drop_to"]), _SUPERVISOR_CAPS if job.get("program_uid") is not None else 0)
    _prctl(_PR_SET_DUMPABLE, 0)
    nonce = job.pop("nonce")
    _own_limits(job["limits"])
    runner = Runner(job)
    if job["kind"] == "stdio":
        report = {"results": [runner.run_stdio(text) for text in job["inputs"]]}
    else:
        report = runner.run_function()
    sys.stdout.write(nonce + json.dumps(report) + "\n")
    sys.stdout.flush()




if __name__ == "__main__":
    main()
