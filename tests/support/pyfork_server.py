"""The server behind pyfork.py: imports torch and numpy once, then forks a child per request.

    /usr/bin/python3 tests/support/pyfork_server.py SOCKET

A request is a 4-byte length, the client's stdin, stdout and stderr (SCM_RIGHTS) and a JSON body
(flags, code or script and its arguments, working folder, environment). The child takes the
three descriptors as its own, answers "R", runs the script as __main__ (or the -c code), runs
the atexit handlers, flushes, and sends its exit status (4 bytes, little endian). It ends at
once when the client goes away (a test's timeout). The server leaves after ATTNVIZ_PYFORK_IDLE
seconds (default 120) without a request, removing its socket.
"""
import json
import os
import select
import signal
import socket
import struct
import sys

PRELOAD = ("numpy", "torch")


def main():
    path = sys.argv[1]
    idle = float(os.environ.get("ATTNVIZ_PYFORK_IDLE", "120"))
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # a machine without it: its scripts import it themselves
            pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    tmp = f"{path}.{os.getpid()}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.umask(0o077)
    s.bind(tmp)
    s.listen(64)
    os.rename(tmp, path)
    inode = os.stat(path).st_ino
    while True:
        ready, _, _ = select.select([s], [], [], idle)
        if not ready:
            break
        conn, _ = s.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            s.close()
            child(conn)  # does not return
        conn.close()
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def recv_exact(conn, n):
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def child(conn):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the script's subprocesses are its to reap
    try:
        head, fds, _, _ = socket.recv_fds(conn, 4, 3)
        if len(head) < 4:
            head += recv_exact(conn, 4 - len(head))
        body = json.loads(recv_exact(conn, struct.unpack("<I", head)[0]))
        if len(fds) != 3:
            raise EOFError
    except Exception:
        os._exit(1)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    conn.sendall(b"R")
    code = run(body, conn)
    try:
        conn.sendall(struct.pack("<i", code))
    except OSError:
        pass
    os._exit(code)


def watch(conn):
    """Ends this child when its client is gone (the client sends nothing after its request)."""
    import threading

    def wait():
        try:
            conn.recv(1)
        except OSError:
            pass
        os._exit(1)
    threading.Thread(target=wait, daemon=True).start()


def run(body, conn):
    import atexit
    import io
    import runpy
    import traceback
    import types

    os.chdir(body["cwd"])
    os.environ.clear()
    os.environ.update(body["env"])
    unbuffered = "-u" in body["flags"]
    sys.dont_write_bytecode = ("-B" in body["flags"] or
                               bool(os.environ.get("PYTHONDONTWRITEBYTECODE")))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  line_buffering=unbuffered or os.isatty(1),
                                  write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True,
                                  write_through=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr

    # sys.path as a fresh start has it: the script's folder (or "" for -c), then PYTHONPATH.
    argv = body["argv"]
    first = "" if body["code"] is not None else os.path.dirname(os.path.abspath(argv[0]))
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first] + extra + sys.path
    sys.argv = list(argv)

    # Seeds and thread counts as a fresh interpreter would have them.
    import random
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        n = os.environ.get("OMP_NUM_THREADS")
        if n and n.isdigit() and int(n) > 0:
            torch.set_num_threads(int(n))
    watch(conn)

    code = 0
    try:
        if body["code"] is not None:
            main_module = types.ModuleType("__main__")
            main_module.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main_module
            exec(compile(body["code"], "<string>", "exec"), main_module.__dict__)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    return code & 0xFF


if __name__ == "__main__":
    main()
