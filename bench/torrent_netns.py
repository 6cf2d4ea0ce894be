#!/usr/bin/python3
"""transmission-cli's row of bench scenario T, run inside a network namespace of its own (`unshare -rn`).

Transmission never connects to a peer at a loopback address (libtransmission's isMartianAddr drops 127.0.0.0/8 and
::1 from every tracker answer), so on 127.0.0.1 it finds no peer. In a namespace this script is started in, the
loopback device also gets 10.77.0.1, and the tracker, the seeder (python3-libtorrent) and transmission-cli all use
that address: still the loopback device, now an address Transmission accepts, and no traffic leaves the namespace.
The tracker is the few lines below (opentracker will not run as the namespace's only user, root): every announce
is answered with the seeder. Prints {"wall": s, "cpu": s, "peak_kib": n} for transmission-cli alone."""

import argparse
import http.server
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time

ADDRESS = "10.77.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((ADDRESS, 0))
        return s.getsockname()[1]


def wait_for_port(port, what):
    deadline = time.time() + 10
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex((ADDRESS, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {ADDRESS}:{port}")


def tracker(port, seeder_port):
    """An HTTP tracker answering every announce with the one seeder, in compact form (BEP 23)."""
    peer = socket.inet_aton(ADDRESS) + seeder_port.to_bytes(2, "big")

    class Announce(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"d8:intervali60e5:peers6:" + peer + b"e"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer((ADDRESS, port), Announce)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--file", required=True, help="the file the seeder seeds")
    parser.add_argument("--work", required=True, help="a folder of its own for the torrent, tracker and config")
    parser.add_argument("--out", required=True, help="where transmission-cli writes the file")
    args = parser.parse_args()

    subprocess.run(["ip", "addr", "add", ADDRESS + "/32", "dev", "lo"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    os.makedirs(args.work, exist_ok=True)
    os.chmod(args.work, 0o755)
    port = free_port()
    torrent = args.work + "/netns.torrent"
    subprocess.run(["mktorrent", "-l", "20", "-a", f"http://{ADDRESS}:{port}/announce", "-o", torrent, args.file],
                   check=True, stdout=subprocess.DEVNULL)
    seeder_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Servers",
                                 "torrent_seeder.py")
    seeder = subprocess.Popen(["/usr/bin/python3", seeder_script, "--torrent", torrent, "--data",
                               os.path.dirname(args.file), "--status", args.work + "/seeder.json",
                               "--interface", ADDRESS],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    helpers = [seeder]
    try:
        seeder_port = json.loads(seeder.stdout.readline())["port"]
        announcer = tracker(port, seeder_port)
        wait_for_port(port, "the tracker")
        config = args.work + "/transmission"
        os.makedirs(config, exist_ok=True)
        with open(config + "/settings.json", "w") as f:
            json.dump({"dht-enabled": False, "lpd-enabled": False, "pex-enabled": False, "utp-enabled": False,
                       "port-forwarding-enabled": False, "blocklist-enabled": False, "speed-limit-down-enabled": False,
                       "speed-limit-up-enabled": False, "ratio-limit-enabled": False,
                       "bind-address-ipv4": ADDRESS}, f)
        # Transmission seeds once done: its finish script stops it (SIGINT ends it cleanly).
        finish = args.work + "/finished.sh"
        with open(finish, "w") as f:
            f.write("#!/bin/sh\nkill -INT $PPID\n")
        os.chmod(finish, 0o755)
        os.makedirs(args.out, exist_ok=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        proc = subprocess.Popen(["transmission-cli", "-g", config, "-w", args.out, "-f", finish, "-p",
                                 str(free_port()), "-M", "-B", "-D", "-U", torrent],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, rss_kib(proc.pid))
            if time.monotonic() - start > 600:
                proc.kill()
                raise RuntimeError("transmission-cli did not finish in 10 minutes")
            time.sleep(0.005)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        json.dump({"wall": wall, "cpu": cpu, "peak_kib": peak}, sys.stdout)
        print(flush=True)
        announcer.shutdown()
    finally:
        for helper in reversed(helpers):
            if helper.stdin:
                helper.stdin.close()
            helper.terminate()
            helper.wait(timeout=10)


if __name__ == "__main__":
    main()
