"""The program's process inside the sandbox: loads the model's program and answers calls of its function.

Run by the supervisor (:mod:`ragen_plugins_envs.sandbox.supervisor`) as ``python -I -S -B -c <this source> PATH
ENTRY CLASS`` in a child with the program's rlimits, uid and seccomp filter. Only arguments come in and only
``marshal``-able values go out, on fds 3 and 4, framed by a 4-byte length. It never runs in ragen's process.
"""

import builtins
import marshal
import os
import struct
import sys

# bound before the program runs, so a program that replaces os.read/os.write cannot change the replies
_rd, _wr = os.read, os.write


def _read(n):
    buf = b""
    while len(buf) < n:
        chunk = _rd(3, n - len(buf))
        if not chunk:
            os._exit(0)
        buf += chunk
    return buf


def _send(tag, value):
    try:
        data = marshal.dumps((tag, value))
    except Exception as exc:
        data = marshal.dumps(("error", "the result cannot be returned (" + type(exc).__name__ + ": only builtin "
                                       "values are compared)"))
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[_wr(4, data):]


def _describe(exc):
    try:
        text = str(exc)
    except BaseException:
        text = ""
    return type(exc).__name__ + (": " + text[:300] if text else "")


def _exit(code=None):
    raise SystemExit(code)


def main(path, entry, cls):
    builtins.exit = builtins.quit = _exit
    ns = {"__name__": "__solution__", "__file__": path, "__builtins__": builtins}
    try:
        with open(path, encoding="utf-8", errors="surrogatepass") as fh:
            src = fh.read()
        exec(compile(src, path, "exec"), ns)
        if not callable(ns.get(entry)) and not (isinstance(ns.get(cls), type) and hasattr(ns[cls], entry)):
            raise NameError("the program defines no function " + repr(entry))
    except BaseException as exc:
        _send("load_error", _describe(exc))
        os._exit(0)
    _send("ready", None)
    while True:
        n = struct.unpack(">I", _read(4))[0]
        args, kwargs = marshal.loads(_read(n))
        try:
            fn = ns.get(entry)
            if not callable(fn):
                fn = getattr(ns[cls](), entry)
            _send("ok", fn(*args, **kwargs))
        except BaseException as exc:
            _send("error", _describe(exc))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
