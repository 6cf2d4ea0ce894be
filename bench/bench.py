"""Benchmarks one download of the same file by haul, curl and aria2c, in one run, against nginx on loopback.

Each tool fetches over one connection into the same file system; the order rotates every round and the median is
reported with its ratio to curl. Two destinations: tmpfs (/dev/shm), where only the transfer machinery counts, and
the working disk, where haul's fdatasync before the final rename is part of its time (curl's and aria2c's files
are not synced; a `curl + sync` row shows what that costs them).
"""
import argparse, datetime, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root, prefix, server_extra=""):
    os.makedirs(prefix + "/logs", exist_ok=True)
    port = free_port()
    with open(prefix + "/nginx.conf", "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log;
events {{ worker_connections 64; }}
http {{ access_log off; sendfile on; client_body_temp_path {prefix}/b; proxy_temp_path {prefix}/p;
  fastcgi_temp_path {prefix}/f; uwsgi_temp_path {prefix}/u; scgi_temp_path {prefix}/s;
  server {{ listen 127.0.0.1:{port}; root {root}; {server_extra} }} }}
""")
    proc = subprocess.Popen(["nginx", "-p", prefix, "-c", prefix + "/nginx.conf"], stderr=subprocess.DEVNULL)
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("nginx did not start")


def peak_rss_kib(pid):
    """VmHWM of a running process; 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(cmd):
    """Wall time and peak RSS (KiB, sampled every 5 ms: rusage would report the forking Python's) of a command."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, peak_rss_kib(proc.pid))
        time.sleep(0.005)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed with {proc.returncode}")
    return elapsed, peak


def sha256(path):
    return subprocess.run(["sha256sum", path], capture_output=True, text=True, check=True).stdout.split()[0]


class Haul:
    def __init__(self, binary, download_dir, data_dir):
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--download-dir", download_dir,
                                      "--data-dir", data_dir, "--connections", "1", "--log-level", "warning",
                                      "--max-connections-per-host", "32"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.base = self.proc.stdout.readline().strip().split()[-1]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            raw = r.read()
            return json.loads(raw) if raw else None

    def download(self, url, name, connections=None):
        """From sending the POST to the server's completed_at (same clock, millisecond precision), so that
        sparse polling neither steals CPU from the transfer nor rounds the result up."""
        start = time.time()
        body = {"url": url, "filename": name}
        if connections:
            body["connections"] = connections
        d = self.call("POST", "/downloads", body)
        while d["state"] not in ("completed", "failed"):
            time.sleep(0.1)
            d = self.call("GET", "/downloads/" + d["id"])
        completed = datetime.datetime.fromisoformat(d["completed_at"].replace("Z", "+00:00")).timestamp()
        elapsed = completed - start
        if d["state"] != "completed":
            raise RuntimeError(f"haul failed: {d['error']}")
        self.call("DELETE", "/downloads/" + d["id"])
        return elapsed

    def peak_rss_kib(self):
        return peak_rss_kib(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--haul", required=True)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenario", choices=["single", "throttled"], default="single")
    args = ap.parse_args()
    if args.scenario == "throttled":
        return throttled(args)

    work = tempfile.mkdtemp(prefix="haul-bench-", dir="/dev/shm")
    os.chmod(work, 0o755)
    disk = tempfile.mkdtemp(prefix="haul-bench-", dir=os.getcwd())
    try:
        source = work + "/www/file.bin"
        os.makedirs(work + "/www")
        os.chmod(work + "/www", 0o755)
        with open(source, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        os.chmod(source, 0o644)
        expected = sha256(source)
        nginx, origin = start_nginx(work + "/www", work + "/nginx")
        url = origin + "/file.bin"
        print(f"{args.size_mib} MiB over loopback from nginx, one connection, {args.rounds} rounds; "
              f"median and best seconds, median MB/s, median ratio to curl")
        for label, dest in (("tmpfs", work + "/dest"), ("disk", disk + "/dest")):
            os.makedirs(dest, exist_ok=True)
            haul = Haul(args.haul, dest + "/haul", dest + "/haul-data")
            times = {"curl -o": [], "curl -o + sync": [], "aria2c -x1": [], "haul": []}
            rss = {"curl -o": 0, "aria2c -x1": 0}
            for rnd in range(args.rounds):
                order = ["curl", "aria2c", "haul"]
                order = order[rnd % 3:] + order[:rnd % 3]
                for tool in order:
                    out = f"{dest}/{tool}-{rnd}.bin"
                    if tool == "curl":
                        t, m = timed(["curl", "-s", "-o", out, url])
                        times["curl -o"].append(t)
                        rss["curl -o"] = max(rss["curl -o"], m)
                        t2, _ = timed(["sync", "--data", out])
                        times["curl -o + sync"].append(t + t2)
                    elif tool == "aria2c":
                        t, m = timed(["aria2c", "-q", "-x1", "-s1", "--file-allocation=none", "--allow-overwrite=true",
                                      "-d", dest, "-o", os.path.basename(out), url])
                        times["aria2c -x1"].append(t)
                        rss["aria2c -x1"] = max(rss["aria2c -x1"], m)
                    else:
                        times["haul"].append(haul.download(url, os.path.basename(out)))
                        out = f"{dest}/haul/{os.path.basename(out)}"
                    if sha256(out) != expected:
                        raise RuntimeError(f"{tool} produced a wrong file")
                    os.remove(out)
            rss["haul (server, peak)"] = haul.peak_rss_kib()
            haul.stop()
            base = statistics.median(times["curl -o"])
            print(f"\n[{label}]")
            for tool, ts in times.items():
                m = statistics.median(ts)
                print(f"  {tool:16s} {m:7.3f} s  best {min(ts):7.3f} s  ({args.size_mib * 1.048576 / m:7.1f} MB/s)"
                      f"  x{m / base:.3f}")
            print("  peak RSS: " + ", ".join(f"{k} {v / 1024:.1f} MiB" for k, v in rss.items()))
        nginx.terminate()
        nginx.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)


def throttled(args):
    """One file from an origin that limits each connection to 8 MB/s (nginx limit_rate): Haul with 1, 4, 8 and
    16 connections against aria2c with 8 and 16, once each, in one run."""
    work = tempfile.mkdtemp(prefix="haul-bench-", dir="/dev/shm")
    os.chmod(work, 0o755)
    try:
        os.makedirs(work + "/www")
        os.chmod(work + "/www", 0o755)
        source = work + "/www/file.bin"
        with open(source, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        os.chmod(source, 0o644)
        expected = sha256(source)
        nginx, origin = start_nginx(work + "/www", work + "/nginx", "limit_rate 8m;")
        url = origin + "/file.bin"
        dest = work + "/dest"
        os.makedirs(dest)
        haul = Haul(args.haul, dest + "/haul", dest + "/haul-data")
        ideal = args.size_mib * 1.048576 / 8.388608
        print(f"{args.size_mib} MiB from nginx limiting each connection to 8 MiB/s (one connection: {ideal:.2f} s)")
        for n in (1, 4, 8, 16):
            t = haul.download(url, f"haul-{n}.bin", connections=n)
            out = f"{dest}/haul/haul-{n}.bin"
            assert sha256(out) == expected, "haul produced a wrong file"
            os.remove(out)
            print(f"  haul, {n:2d} connections   {t:7.2f} s   (ideal {ideal / n:5.2f} s)")
        for n in (8, 16):
            t, _ = timed(["aria2c", "-q", f"-x{n}", f"-s{n}", "-k1M", "--file-allocation=none",
                          "--allow-overwrite=true", "-d", dest, "-o", f"aria-{n}.bin", url])
            assert sha256(f"{dest}/aria-{n}.bin") == expected, "aria2c produced a wrong file"
            os.remove(f"{dest}/aria-{n}.bin")
            print(f"  aria2c -x{n:<2d} -s{n:<2d} -k1M   {t:7.2f} s   (ideal {ideal / n:5.2f} s)")
        haul.stop()
        nginx.terminate()
        nginx.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
