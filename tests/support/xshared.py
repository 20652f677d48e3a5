"""Runs a command on a shared Xvfb display, taking xvfb-run's arguments:

    /usr/bin/python3 -S tests/support/xshared.py [-a] [-s SERVER_ARGS] COMMAND [ARGS...]

Why: the app tests start the binary about 250 times, each under its own `xvfb-run -a`, and a
server of its own costs about 0.5 s of wall time per start on the 2-core machines the suites
are timed on. Here one Xvfb serves every test of a run: the first caller starts it (under a lock,
so that two tests starting together start one), with a screen as large as any test asks for
(1920 x 1200, 24 bits); a test's window is its own, so tests that run at the same time do not
draw into each other's pixels (the app reads its own back buffer). The server stops when no
command has used it for ATTNVIZ_XSHARED_IDLE seconds (default 120) and none is running.

The screen size of -s is not used: every window the tests open fits the shared screen. Without
Xvfb, or with ATTNVIZ_XSHARED=0, the command runs under xvfb-run itself, with the same
arguments.
"""
import fcntl
import os
import sys

XVFB = "/usr/bin/Xvfb"
XVFB_RUN = "/usr/bin/xvfb-run"
SCREEN = "1920x1200x24"


def direct():
    os.execv(XVFB_RUN, [XVFB_RUN] + sys.argv[1:])


def parse(args):
    """-> the command after xvfb-run's options, or None."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-a", "--auto-servernum"):
            i += 1
        elif a in ("-s", "-n", "-e", "-f"):
            i += 2
        elif a.startswith(("--server-args=", "--server-num=", "--error-file=", "--auth-file=")):
            i += 1
        elif a.startswith("-"):
            return None
        else:
            break
    return args[i:] or None


def state_dir():
    d = f"/tmp/attnviz-xshared-{os.getuid()}"
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def alive(state):
    """The display of a running server recorded in `state`, or None."""
    try:
        with open(state) as f:
            display, pid = f.read().split()
        os.kill(int(pid), 0)
        if os.path.exists(f"/tmp/.X11-unix/X{display}"):
            return display
    except (OSError, ValueError):
        pass
    return None


def start(d, state):
    """Starts the supervisor (supervise() in a new session) and waits for the display."""
    import subprocess
    import time
    try:
        os.unlink(state)
    except OSError:
        pass
    # setsid -f: the supervisor is nobody's child (not the command's this process becomes).
    subprocess.run(["setsid", "-f", sys.executable, "-S", os.path.abspath(__file__),
                    "--supervise", d], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, close_fds=True, cwd="/")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        display = alive(state)
        if display is not None:
            return display
        time.sleep(0.02)
    return None


def supervise(d):
    """Runs Xvfb, records its display, and stops it once idle (no user, stamp old)."""
    import signal
    import subprocess
    import time
    idle = float(os.environ.get("ATTNVIZ_XSHARED_IDLE", "120"))
    state, stamp = os.path.join(d, "state"), os.path.join(d, "stamp")
    r, w = os.pipe()
    xvfb = subprocess.Popen([XVFB, "-displayfd", str(w), "-screen", "0", SCREEN, "-nolisten",
                             "tcp", "-noreset"], pass_fds=(w,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    display = b""
    while not display.endswith(b"\n"):
        chunk = os.read(r, 16)
        if not chunk:
            break
        display += chunk
    os.close(r)
    if not display.strip().isdigit():
        xvfb.kill()
        return
    with open(stamp, "w"):
        pass
    with open(state + ".tmp", "w") as f:
        f.write(f"{display.decode().strip()} {xvfb.pid}\n")
    os.rename(state + ".tmp", state)
    lock_path, users_path = os.path.join(d, "lock"), os.path.join(d, "users")
    while xvfb.poll() is None:
        time.sleep(2)
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                age = time.time() - os.stat(stamp).st_mtime
            except OSError:
                age = idle
            if age < idle:
                continue
            with open(users_path, "w") as users:
                try:
                    fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # a command still runs on the display
                try:
                    os.unlink(state)
                except OSError:
                    pass
                xvfb.send_signal(signal.SIGTERM)
                break
    try:
        xvfb.wait(10)
    except Exception:
        xvfb.kill()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--supervise":
        supervise(sys.argv[2])
        return
    command = parse(sys.argv[1:])
    if (command is None or os.environ.get("ATTNVIZ_XSHARED") == "0" or
            not os.access(XVFB, os.X_OK)):
        direct()
    d = state_dir()
    state = os.path.join(d, "state")
    with open(os.path.join(d, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        display = alive(state) or start(d, state)
        if display is None:
            direct()
        os.utime(os.path.join(d, "stamp"))
        # Held (shared) until the command ends: the supervisor stops the server only when no
        # one holds it. The descriptor survives the exec below.
        users = os.open(os.path.join(d, "users"), os.O_WRONLY | os.O_CREAT, 0o600)
        fcntl.flock(users, fcntl.LOCK_SH)
        os.set_inheritable(users, True)
    os.environ["DISPLAY"] = ":" + display
    os.environ.pop("XAUTHORITY", None)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write(f"xshared: cannot run {command[0]}: {e.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
