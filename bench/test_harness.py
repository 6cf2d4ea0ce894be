"""The bench harness as a new user meets it (`make test` runs this): from a directory that nginx's workers
(nobody) cannot traverse, as a checkout in a 0700 home directory is, scenario C's files must still be served; and
when a run fails, nothing it started may be left running, holding the caller's output open.

    python3 bench/test_harness.py --haul .build/debug/haul
"""
import argparse, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def leftovers(marker):
    """Processes still running whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in command and int(pid) != os.getpid():
            found.append(f"{pid}: {command.strip()}")
    return found


def run_bench(haul, cwd):
    # capture_output reads both pipes to their end: a server left holding them would make this time out.
    return subprocess.run([sys.executable, f"{HERE}/bench.py", "--haul", haul, "--quick", "--scenarios", "C"],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--haul", required=True)
    args = ap.parse_args()
    haul = os.path.abspath(args.haul)
    failures = []
    # mkdtemp makes a 0700 directory: as a home directory on Debian, which nobody cannot enter.
    with tempfile.TemporaryDirectory(prefix="haul-private-") as private:
        os.chmod(private, 0o700)
        checkout = os.path.join(private, "checkout")
        os.mkdir(checkout)
        result = run_bench(haul, checkout)
        if result.returncode != 0:
            failures.append(f"from a 0700 directory the bench failed ({result.returncode}):\n"
                            f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
        if os.listdir(checkout):
            failures.append(f"it left {os.listdir(checkout)} in the working directory")

        # A run that fails (a server binary that does not start) stops the nginx it started before failing.
        broken = os.path.join(private, "broken-haul")
        with open(broken, "w") as f:
            f.write("#!/bin/sh\necho not a server\nexit 1\n")
        os.chmod(broken, 0o755)
        try:
            result = run_bench(broken, checkout)
            if result.returncode == 0:
                failures.append("a bench run whose server does not start passed")
            elif "did not start" not in result.stderr:
                failures.append(f"the failure does not say what failed: {result.stderr[-1000:]}")
        except subprocess.TimeoutExpired:
            failures.append("a failed bench run kept its output open: something it started still runs")
        left = leftovers("nginx-c")
        if left:
            failures.append("a failed run left these running:\n" + "\n".join(left))
            for line in left:
                os.kill(int(line.split(":")[0]), 9)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    print(f"bench harness: {2 - min(2, len(failures))} of 2 checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
