"""pyfork.py against the interpreter itself: the same scripts run both ways must give the same
exit status, stdout and stderr (the interpreter is the reference; nothing here is expected from
pyfork's own output). Also checks that a killed client takes its child with it.

    /usr/bin/python3 tests/support/pyfork_test.py

Run by ctest (label support). Exit 0 when every case agrees; otherwise one line per difference.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
CLIENT = [PYTHON, "-S", os.path.join(HERE, "pyfork.py")]

SCRIPT = r'''
import os, sys
print("argv", sys.argv[1:])
print("name", __name__, os.path.basename(__file__))
print("cwd", os.getcwd())
print("path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
print("env", os.environ.get("PYFORK_TEST_VALUE"))
print("pythonpath", os.environ.get("PYFORK_EXTRA") in sys.path)
print("stdin", sys.stdin.read().strip())
import helper_module
print("helper", helper_module.VALUE)
import subprocess
print("subprocess", subprocess.run(["sh", "-c", "exit 7"]).returncode)
print("to stderr", file=sys.stderr)
import atexit
atexit.register(lambda: print("atexit ran"))
code = int(sys.argv[1])
if code == 99:
    raise RuntimeError("boom")
if code == 98:
    sys.exit("a message")
sys.exit(code)
'''

CASES = [
    ("script exit 0", ["{script}", "0", "two words"], "in"),
    ("script exit 3", ["{script}", "3"], ""),
    ("uncaught exception", ["{script}", "99"], "x"),
    ("sys.exit(str)", ["{script}", "98"], ""),
    ("-u", ["-u", "{script}", "0"], "u"),
    ("-c", ["-c", "import sys; print(sys.argv, __name__); sys.exit(5)", "a", "b"], ""),
    ("-c torch", ["-c", "import torch, numpy; print(torch.zeros(3).sum().item(), "
                  "numpy.arange(4).sum())"], ""),
]


def run(argv, stdin, cwd, env):
    p = subprocess.run(argv, input=stdin.encode(), cwd=cwd, env=env, capture_output=True)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def normalise(err):
    # A traceback's frames differ (the child runs the script through runpy); its last line and
    # the script's own frames do not.
    lines = err.splitlines()
    if "Traceback (most recent call last):" in lines:
        keep = [l for l in lines if l.startswith("RuntimeError") or "to stderr" in l]
        return "\n".join(keep)
    return err


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "case.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        with open(os.path.join(d, "helper_module.py"), "w") as f:
            f.write("VALUE = 42\n")
        extra = os.path.join(d, "extra")
        os.mkdir(extra)
        work = os.path.join(d, "work")
        os.mkdir(work)
        env = dict(os.environ, PYFORK_TEST_VALUE="é and spaces", PYFORK_EXTRA=extra,
                   PYTHONPATH=extra)
        for name, args, stdin in CASES:
            args = [a.replace("{script}", script) for a in args]
            want = run([PYTHON] + args, stdin, work, env)
            got = run(CLIENT + args, stdin, work, env)
            got2 = run(CLIENT + args, stdin, work, env)  # the second goes to a running server
            for label, g in (("first", got), ("second", got2)):
                if (g[0], g[1], normalise(g[2])) != (want[0], want[1], normalise(want[2])):
                    failures.append(f"{name} ({label} run): pyfork gave {g!r}, "
                                    f"python3 gave {want!r}")

        # Each child draws its own random numbers, as fresh interpreters do (the server's state
        # is copied into every child, so without a reseed they would all draw the same).
        draw = ["-c", "import random, numpy; print(random.random(), numpy.random.rand())"]
        a, b = run(CLIENT + draw, "", work, env), run(CLIENT + draw, "", work, env)
        if a[0] != 0 or b[0] != 0 or any(x == y for x, y in zip(a[1].split(), b[1].split())):
            failures.append(f"two children drew the same numbers or failed: {a!r} {b!r}")

        # A client killed while its child runs: the child ends too (a test's timeout).
        marker = os.path.join(d, "still-running")
        code = (f"import time, pathlib\nfor i in range(100):\n    time.sleep(0.1)\n"
                f"    pathlib.Path({marker!r}).write_text(str(i))\n")
        client = subprocess.Popen(CLIENT + ["-c", code])
        time.sleep(1.0)
        client.kill()
        client.wait()
        time.sleep(0.2)
        if os.path.exists(marker):
            os.unlink(marker)
        time.sleep(0.5)
        if os.path.exists(marker):
            failures.append("a killed client's child kept running")
    for f in failures:
        print(f)
    print(f"{len(CASES)} cases, {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
