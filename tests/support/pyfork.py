"""Runs a Python reference the way `/usr/bin/python3 [-u] [-B] SCRIPT|-c CODE ARGS...` does, but
forked from a server that has already imported torch and numpy.

Why: the suites start Python about 340 times, 250 of them importing torch, and the import alone
costs about 1.8 s of CPU each time on the 2-core machines the suites are timed on (about 450
CPU-seconds of a 1,500-second run). The tests name this client instead of the interpreter
(ATTNVIZ_PYTHON, tests/CMakeLists.txt); it asks the server (pyfork_server.py) for a child, which
takes this process's stdin, stdout and stderr, its working folder, environment and arguments,
runs the script as __main__ and reports its exit status. What the script computes is what a
fresh interpreter computes: the child starts from a process that has imported the modules and
done nothing else, with the environment, sys.path and seeds of a fresh start.

The first client starts the server (under a lock, so that two tests starting together start one);
it exits after ATTNVIZ_PYFORK_IDLE seconds (default 120) without a request. Anything this client
does not handle (another interpreter flag, `-m`, a script on stdin, no server) runs the real
interpreter with the same arguments, as does ATTNVIZ_PYFORK=0.

Run with `/usr/bin/python3 -S` (no site: this client needs only the standard library).
"""
import os
import socket
import struct
import sys

PYTHON = "/usr/bin/python3"
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyfork_server.py")


def direct():
    os.execv(PYTHON, [PYTHON] + sys.argv[1:])


def parse(args):
    """-> (flags, code or None, argv) for the forms the server runs; None for any other."""
    flags = []
    i = 0
    while i < len(args) and args[i] in ("-u", "-B"):
        flags.append(args[i])
        i += 1
    if i >= len(args):
        return None
    if args[i] == "-c":
        if i + 1 >= len(args):
            return None
        return flags, args[i + 1], ["-c"] + args[i + 2:]
    if args[i].startswith("-"):
        return None
    return flags, None, args[i:]


def socket_path():
    # One server per copy of this file and its version: an edit to the server starts a new one.
    import zlib
    st = os.stat(SERVER)
    key = zlib.crc32(f"{SERVER}:{st.st_mtime_ns}:{st.st_size}".encode())
    return f"/tmp/attnviz-pyfork-{os.getuid()}-{key:08x}.sock"


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def start_server(path):
    """Starts the server unless another client did; -> a connected socket or None."""
    import fcntl
    import subprocess
    import time
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        s = connect(path)
        if s is not None:
            return s
        try:
            os.unlink(path)
        except OSError:
            pass
        env = {k: v for k, v in os.environ.items()
               if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                            "PYTHONPATH")}
        # setsid -f: the server is nobody's child (not this client's, nor the interpreter's
        # this client may become).
        subprocess.run(["setsid", "-f", PYTHON, SERVER, path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                       env=env, cwd="/")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            s = connect(path)
            if s is not None:
                return s
            time.sleep(0.02)
        return None


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        try:
            chunk = s.recv(n - len(out))
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk
    return out


def main():
    if os.environ.get("ATTNVIZ_PYFORK") == "0":
        direct()
    parsed = parse(sys.argv[1:])
    if parsed is None:
        direct()
    flags, code, argv = parsed
    path = socket_path()
    s = connect(path) or start_server(path)
    if s is None:
        direct()
    import json
    body = json.dumps({"flags": flags, "code": code, "argv": argv, "cwd": os.getcwd(),
                       "env": dict(os.environ)}).encode()
    try:
        socket.send_fds(s, [struct.pack("<I", len(body))], [0, 1, 2])
        s.sendall(body)
    except OSError:
        direct()
    # "R": a child has the request and runs it; before that the server may have been leaving
    # (its idle time out), and the real interpreter runs instead.
    if recv_exact(s, 1) != b"R":
        direct()
    status = recv_exact(s, 4)
    if len(status) != 4:
        sys.stderr.write("pyfork: the Python process ended without an exit status "
                         "(killed by a signal?)\n")
        sys.exit(1)
    sys.exit(struct.unpack("<i", status)[0])


if __name__ == "__main__":
    main()
