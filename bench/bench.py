"""make bench: Haul against curl and aria2 on the same files, in one run, on loopback.

Scenarios (bench.py --scenarios A,B,C,D,E,F,G,H,I,J,K,M,P,T,V,W; --quick shrinks every input so `make test` can run the harness):
  A  one large file, unthrottled: Haul with 1 and 8 connections, curl -o, aria2c -x1 and -x8; the ceilings
     curl -o /dev/null and dd (with and without conv=fdatasync); then the same file over FTP (vsftpd) and SFTP
     (sshd): Haul -c1 and -c8, curl, aria2c -x1 and -x8 (FTP only: no SFTP key login in aria2).
  B  one file from an nginx limiting each connection to 8 MiB/s: Haul with 1, 4, 8 and 16 connections, curl,
     aria2c -x8 and -x16.
  C  1,000 files of 64 KiB, 16 at a time: Haul, aria2c -i -j16, curl -Z --parallel-max 16; on tmpfs and disk;
     then over FTP (vsftpd) and SFTP (sshd) on tmpfs.
  D  API latency with wrk (-t2 -c32) on one download's status and on a list of 100, idle and while 4 throttled
     downloads run: Haul's GET /downloads/{id} and GET /downloads?limit=100 against aria2's RPC aria2.tellStatus
     and aria2.tellWaiting; an event-stream client follows the busy downloads meanwhile (events, longest gap).
  E  10,000 queued downloads added one request at a time: Haul's RSS and time, against aria2's RPC.
  F  10,000 event-stream clients following one download: Haul's RSS and CPU.
  G  "uneven": one file from an nginx limiting one connection in five to 1 MiB/s and the rest to 8 MiB/s: Haul
     with 8 and 16 connections against aria2c -x8/-x16 and axel -n8/-n16.
  H  100,000 stored downloads (nine in ten completed): start-up time, list pages, changed_since, /stats and RSS.
  K  lists: 1,000, 10,000 and 100,000 URLs of 4 KiB and of 64 KiB added by batch, on tmpfs and on disk: Haul
     against aria2c -i -j16 and curl -Z -K on the same list; wall, CPU per file, peak RSS, and Haul's CPU per file
     at each length over that at the shortest.
  M  a million stored downloads (--stored N): added paused by batch (time, server CPU, RSS), then a restart (time
     to the first answer, RSS), then status reads and pages of 100 at random places, unfiltered and by state,
     category, search and id prefix (p50, p99). Not in the default run: it takes minutes and gigabytes.
  P  play while it downloads: a 128 MiB file from TestOrigin pacing each response at 4 MiB/s, on 8 connections; the
     time to the first byte and to the whole MiB at 90% read by Range from Haul's file route at once, against aria2c
     -x8 -k1M with --stream-piece-selector=inorder (the MiB is there once aria2's file holds it), and each
     one's whole download.
  T  a torrent (1 GiB; 16 MiB with --quick) from one local seeder (python3-libtorrent) found through opentracker:
     Haul --bittorrent against aria2c --seed-time=0; wall, CPU, peak RSS.
  W  webhook fan-out: 100 webhooks to an nginx answering 204, 1,000 downloads added as one batch, then removed
     with one DELETE: /healthz latency from another process all the while, the time to drain the outbox, the
     store's size and the server's RSS (no anchor: neither aria2 nor curl has webhooks).
  J  scenario B over TLS: one file from nginx limiting each request to 8 MiB/s, offered over HTTP/2 and over
     HTTP/1.1 only: Haul x8 as streams of one h2 connection against Haul x8 on eight 1.1 connections, aria2c -x8
     (1.1) and curl (h2, one stream).
Each contender runs in rotating order after one discarded warm-up; medians with min-max are reported, and every
result's sha256 is checked. "wall + sync" adds a `sync` of the written file (Haul fdatasyncs before it reports
completion, curl does not). Results go to bench/results/latest.md.
"""
import argparse, base64, datetime, glob, hashlib, json, os, random, resource, selectors, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time
import http.client

MIB = 1 << 20
GIB = 1 << 30

# Every process the harness starts, and every stop function (PostgreSQL's), so that each is stopped on every way
# out of a run: success, a failed scenario, Ctrl-C or SIGTERM. A server left behind would hold the caller's output
# open (make's pipe) and its port.
STARTED = []
CLEANUPS = []


def spawn(cmd, **kwargs):
    """subprocess.Popen, remembered for stop_everything(); standard input and output never the caller's."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.DEVNULL)
    proc = subprocess.Popen(cmd, **kwargs)
    STARTED.append(proc)
    return proc


def kill_tree(root):
    """SIGKILL to `root` and every process below it (by parent id in /proc), all found before the first dies."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found = [root]
    for pid in found:
        found.extend(children.get(pid, []))
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_everything():
    for stop in reversed(CLEANUPS):
        try:
            stop()
        except Exception as error:  # noqa: BLE001 - the others must still be stopped
            print(f"bench: cleanup failed: {error}", file=sys.stderr)
    CLEANUPS.clear()
    for proc in STARTED:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 5
    for proc in STARTED:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    STARTED.clear()


def readable_by_everyone(path):
    """Whether every directory from / down to `path` lets other users through: nginx's workers run as nobody."""
    path = os.path.realpath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def disk_directory():
    """Where the on-disk scenarios keep their files: the working directory when nginx's workers can reach it, else
    the disk's shared temporary directory. A checkout in a 0700 home directory (Debian's default, or /root) is
    not one the workers can read, and every download of its files got 403."""
    for candidate in (os.getcwd(), "/var/tmp", tempfile.gettempdir()):
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK) and readable_by_everyone(candidate):
            return candidate
    raise RuntimeError("no directory that nginx's workers (nobody) can read: make /var/tmp world-accessible")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(root, prefix, server_extra="", http_extra="", listen_extra=""):
    os.makedirs(prefix + "/logs", exist_ok=True)
    port = free_port()
    with open(prefix + "/nginx.conf", "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; client_body_temp_path {prefix}/b; proxy_temp_path {prefix}/p;
  fastcgi_temp_path {prefix}/f; uwsgi_temp_path {prefix}/u; scgi_temp_path {prefix}/s; {http_extra}
  server {{ listen 127.0.0.1:{port}{listen_extra}; root {root}; {server_extra} }} }}
""")
    proc = spawn(["nginx", "-p", prefix, "-c", prefix + "/nginx.conf"], stderr=subprocess.DEVNULL)
    wait_for_port(port, "nginx")
    return proc, ("https" if "ssl" in listen_extra else "http") + f"://127.0.0.1:{port}"


def start_vsftpd(root, prefix):
    """vsftpd serving `root` to anonymous logins on a free loopback port, passive only: (stop, ftp:// origin). Its
    sessions are processes of their own, killed with the listener by their process group."""
    os.makedirs(prefix + "/empty", exist_ok=True)
    port = free_port()
    with open(prefix + "/vsftpd.conf", "w") as f:
        f.write(f"""listen=YES
listen_address=127.0.0.1
listen_port={port}
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root={root}
local_enable=NO
write_enable=NO
secure_chroot_dir={prefix}/empty
seccomp_sandbox=NO
max_clients=0
max_per_ip=0
xferlog_enable=NO
use_sendfile=YES
""")
    proc = spawn(["vsftpd", prefix + "/vsftpd.conf"], stderr=subprocess.DEVNULL, start_new_session=True)
    CLEANUPS.append(lambda: os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None)
    wait_for_port(port, "vsftpd")
    return proc, f"ftp://127.0.0.1:{port}"


class SSHServer:
    """OpenSSH's sshd on a free loopback port with a host key and a user key made for the run, SFTP only, root
    logging in with the key (sshd needs root). `url(path)` names an absolute path on this machine."""

    def __init__(self, prefix):
        os.makedirs(prefix, exist_ok=True)
        os.makedirs("/run/sshd", exist_ok=True)
        self.prefix = prefix
        for key in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{prefix}/{key}"], check=True)
        shutil.copy(f"{prefix}/user_key.pub", f"{prefix}/authorized_keys")
        self.port = free_port()
        with open(f"{prefix}/host_key.pub") as f:
            host_key = f.read()
        with open(f"{prefix}/known_hosts", "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {host_key}")
        printed = subprocess.run(["ssh-keygen", "-lf", f"{prefix}/host_key.pub"], capture_output=True, text=True,
                                 check=True).stdout
        # curl --hostpubsha256 takes the fingerprint's base64 without its "SHA256:".
        self.host_sha256 = printed.split()[1].split(":", 1)[1]
        with open(f"{prefix}/sshd_config", "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {prefix}/host_key
PidFile {prefix}/sshd.pid
AuthorizedKeysFile {prefix}/authorized_keys
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
Subsystem sftp internal-sftp
""")
        config = f"{prefix}/sshd_config"
        proc = spawn(["/usr/sbin/sshd", "-D", "-f", config, "-E", f"{prefix}/sshd.log"])
        self.proc = proc
        # Each login's process calls setsid(): found as the listener's children, by pid, not by its group.
        CLEANUPS.append(lambda: kill_tree(proc.pid))
        wait_for_port(self.port, "sshd")

    @staticmethod
    def available():
        return os.getuid() == 0 and os.path.exists("/usr/sbin/sshd")

    def url(self, path):
        return f"sftp://root@127.0.0.1:{self.port}{path}"

    def haul_options(self):
        return ["--ssh-key", f"{self.prefix}/user_key", "--ssh-known-hosts", f"{self.prefix}/known_hosts"]

    def curl_options(self):
        return ["--key", f"{self.prefix}/user_key", "--pubkey", f"{self.prefix}/user_key.pub",
                "--hostpubsha256", self.host_sha256]


def wait_for_port(port, what):
    """Returns once something accepts connections on the loopback port (5 s at most)."""
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"{what} did not start")


def start_aria2_rpc(directory, *options):
    """aria2c with its JSON-RPC on a free loopback port: (process, port)."""
    port = free_port()
    proc = spawn(["aria2c", "--enable-rpc", f"--rpc-listen-port={port}", "--rpc-listen-all=false",
                             "-d", directory, *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, "aria2c")
    return proc, port


def proc_stat(pid):
    """(CPU seconds, peak RSS KiB) of a live process."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        peak = 0
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
        return cpu, peak
    except OSError:
        return 0.0, 0


def timed(cmd, cwd=None):
    """Wall seconds, CPU seconds (user + sys) and peak RSS (KiB, sampled from /proc: rusage's maxrss would
    report the forking Python's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = spawn(cmd, stderr=subprocess.DEVNULL, cwd=cwd)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, proc_stat(proc.pid)[1])
        time.sleep(0.005)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        how = (f"was killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exited with {proc.returncode}")
        raise RuntimeError(f"{os.path.basename(cmd[0])} {how}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MIB):
            h.update(chunk)
    return h.hexdigest()


def sync_file(path):
    start = time.monotonic()
    subprocess.run(["sync", "--data", path], check=True)
    return time.monotonic() - start


def make_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, MIB)
            f.write(os.urandom(n))
            left -= n
    os.chmod(path, 0o644)
    return sha256(path)


def reread(path):
    """Pull a source file back into the page cache (it is reclaimed here after about a minute)."""
    with open(path, "rb") as f:
        while f.read(8 * MIB):
            pass


class Haul:
    def __init__(self, binary, root, *extra):
        os.makedirs(root, exist_ok=True)
        self.root = root
        self.proc = spawn([binary, "serve", "--listen", "127.0.0.1:0", "--download-dir", root + "/dl",
                                      "--data-dir", root + "/data", "--log-level", "warning",
                                      # The default reserve (1 GiB) is for production; a small disk still benches.
                                      "--min-free-space", "64M", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if ":" not in line:
            raise RuntimeError(f"{binary} serve did not start (it printed '{line}')")
        self.port = int(line.rsplit(":", 1)[1])
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port)

    def call(self, method, path, body=None):
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                                  headers={"Content-Type": "application/json"})
                reply = self.conn.getresponse()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                # The server closed the kept-alive connection while another contender ran for longer than its
                # --http-timeout: a new connection, once (every call here is safe to send again, or idempotent).
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port)
                if attempt == 2:
                    raise
        raw = reply.read()
        if reply.status >= 400:
            raise RuntimeError(f"{method} {path}: {reply.status} {raw[:200]}")
        return json.loads(raw) if raw else None

    def wait_all(self, count, poll=0.01):
        while True:
            stats = self.call("GET", "/stats")
            if stats["completed"] + stats["failed"] >= count:
                if stats["failed"]:
                    raise RuntimeError(f"{stats['failed']} haul downloads failed")
                return
            time.sleep(poll)

    def download(self, url, name, connections, insecure=False):
        """Wall (from the POST to the server's completed_at), server CPU, and the file's path."""
        cpu0 = proc_stat(self.proc.pid)[0]
        start = time.time()
        d = self.call("POST", "/downloads", {"url": url, "filename": name, "connections": connections,
                                             "insecure": insecure})
        while d["state"] not in ("completed", "failed"):
            time.sleep(0.05)
            d = self.call("GET", "/downloads/" + d["id"])
        if d["state"] != "completed":
            raise RuntimeError(f"haul failed: {d['error']}")
        done = datetime.datetime.fromisoformat(d["completed_at"].replace("Z", "+00:00")).timestamp()
        self.call("DELETE", "/downloads/" + d["id"])
        return done - start, proc_stat(self.proc.pid)[0] - cpu0, f"{self.root}/dl/{name}"

    def peak_rss(self):
        return proc_stat(self.proc.pid)[1]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


class Report:
    def __init__(self):
        self.lines = []
        # (label, Haul / anchor) with "lower is better" everywhere, for the chart.
        self.ratios = []

    def section(self, title, note):
        self.lines += ["", f"## {title}", "", note, ""]
        print(f"\n{title}\n{note}")

    def table(self, header, rows):
        self.lines.append("| " + " | ".join(header) + " |")
        self.lines.append("|" + "---|" * len(header))
        for row in rows:
            self.lines.append("| " + " | ".join(row) + " |")
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
        for row in [header] + rows:
            print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def fmt(values, unit="s"):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.3f} {unit}"
    return f"{med:.3f} {unit} ({min(values):.3f}-{max(values):.3f})"


# Other tools that failed in this run (crashed, exited non-zero, wrote a wrong file): a row's result, reported, not
# the run's failure. Only Haul's own failures fail it.
CONTENDER_FAILURES = []


class AnchorFailed(KeyError):
    """A scenario asked for the results of a contender that failed: the scenario has nothing to compare with."""


class Results(dict):
    def __missing__(self, name):
        raise AnchorFailed(name)


def rounds(contenders, n, run, warm_up=True):
    """Runs every contender once to warm up, then n rounds in rotating order; returns {name: [results]}. Another
    tool that fails is dropped from `contenders` (in place, so the scenario's rows leave it out) and from the
    results, and recorded in CONTENDER_FAILURES; Haul's failures end the run."""
    results = Results({name: [] for name in contenders})

    def attempt(name, keep):
        if name not in contenders:
            return
        try:
            result = run(name)
        except Exception as error:  # noqa: BLE001 - another tool's failure is its row's result
            if name.startswith("haul"):
                raise
            contenders.remove(name)
            del results[name]
            CONTENDER_FAILURES.append(f"{name}: {error}")
            print(f"bench: {name} failed ({error}); its row is left out", file=sys.stderr)
            return
        if keep:
            results[name].append(result)

    for name in list(contenders) if warm_up else []:
        attempt(name, keep=False)
    for r in range(n):
        if not contenders:
            break
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for name in order:
            attempt(name, keep=True)
    return results


def scenario_a(args, report, work, disk):
    size = (8 if args.quick else 1024) * MIB
    src = work + "/www/big.bin"
    expected = make_file(src, size)
    nginx, origin = start_nginx(work + "/www", work + "/nginx-a")
    url = origin + "/big.bin"
    dest = disk + "/a"
    os.makedirs(dest)
    haul = Haul(args.haul, disk + "/haul-a")
    contenders = ["haul -c1", "haul -c8", "curl -o", "aria2c -x1", "aria2c -x8", "curl -o /dev/null",
                  "dd", "dd conv=fdatasync"]

    def run(name):
        reread(src)
        out = f"{dest}/out.bin"
        if name.startswith("haul"):
            wall, cpu, out = haul.download(url, "out.bin", 1 if name == "haul -c1" else 8)
            rss = haul.peak_rss()
        elif name == "curl -o":
            wall, cpu, rss = timed(["curl", "-s", "-o", out, url])
        elif name == "curl -o /dev/null":
            wall, cpu, rss = timed(["curl", "-s", "-o", "/dev/null", url])
            return wall, wall, cpu, rss
        elif name.startswith("aria2c"):
            n = name[-1]
            wall, cpu, rss = timed(["aria2c", "-q", f"-x{n}", f"-s{n}", "-k1M", "--file-allocation=none",
                                    "--allow-overwrite=true", "-d", dest, "-o", "out.bin", url])
        else:
            cmd = ["dd", f"if={src}", f"of={out}", "bs=1M"] + (["conv=fdatasync"] if "fdatasync" in name else [])
            wall, cpu, rss = timed(cmd)
        synced = wall + sync_file(out)
        if sha256(out) != expected:
            raise RuntimeError(f"{name} wrote a wrong file")
        os.remove(out)
        return wall, synced, cpu, rss

    results = rounds(contenders, 1 if args.quick else args.rounds, run)
    anchor = statistics.median([r[1] for r in results["curl -o"]])
    report.ratios.append(("A large file vs curl+sync", statistics.median([r[1] for r in results["haul -c1"]]) / anchor))
    rows = []
    for name in contenders:
        walls = [r[0] for r in results[name]]
        synced = [r[1] for r in results[name]]
        cpus = [r[2] for r in results[name]]
        rss = max(r[3] for r in results[name])
        rows.append([name, fmt(walls), fmt(synced), f"{statistics.median(synced) / anchor:.2f}", fmt(cpus),
                     f"{rss / 1024:.1f} MiB"])
    report.section(f"A: one {size // MIB} MiB file, unthrottled, onto disk",
                   "Haul's wall time includes its fdatasync, so compare it with the others' wall + sync. Haul's "
                   "CPU and RSS are its server's (RSS: the peak of the whole run, API and all).")
    report.table(["contender", "wall", "wall + sync", "x curl wall+sync", "CPU (user+sys)", "peak RSS"], rows)
    haul.stop()
    nginx.terminate()
    scenario_a_file_transfer(args, report, work, disk, src, expected)
    os.remove(src)


def scenario_a_file_transfer(args, report, work, disk, src, expected):
    """Scenario A's file over FTP (vsftpd) and SFTP (sshd): Haul with 1 and 8 connections against curl and aria2c
    on the same server. aria2c logs in to SFTP only with a password (aria2 #1443), so it has no SFTP row."""
    size = os.path.getsize(src)
    vsftpd, ftp = start_vsftpd(os.path.dirname(src), disk + "/vsftpd-a")
    ssh = SSHServer(disk + "/sshd-a") if SSHServer.available() else None
    dest = disk + "/a-ft"
    os.makedirs(dest)
    haul = Haul(args.haul, disk + "/haul-a-ft", *(ssh.haul_options() if ssh else []))
    urls = {"ftp": f"{ftp}/{os.path.basename(src)}"}
    contenders = ["haul ftp -c1", "haul ftp -c8", "curl ftp", "aria2c ftp -x1", "aria2c ftp -x8"]
    if ssh:
        urls["sftp"] = ssh.url(src)
        contenders += ["haul sftp -c1", "haul sftp -c8", "curl sftp"]

    def run(name):
        reread(src)
        tool, scheme = name.split()[:2]
        url = urls[scheme]
        out = f"{dest}/out.bin"
        if tool == "haul":
            wall, cpu, out = haul.download(url, "out.bin", int(name.rsplit("c", 1)[1]))
            rss = haul.peak_rss()
        elif tool == "curl":
            wall, cpu, rss = timed(["curl", "-s", "-o", out, *(ssh.curl_options() if scheme == "sftp" else []), url])
        else:
            n = name[-1]
            wall, cpu, rss = timed(["aria2c", "-q", f"-x{n}", f"-s{n}", "-k1M", "--file-allocation=none",
                                    "--allow-overwrite=true", "-d", dest, "-o", "out.bin", url])
        synced = wall + sync_file(out)
        if sha256(out) != expected:
            raise RuntimeError(f"{name} wrote a wrong file")
        os.remove(out)
        return wall, synced, cpu, rss

    results = rounds(contenders, 1 if args.quick else min(args.rounds, 3), run)
    rows = []
    for name in contenders:
        scheme = name.split()[1]
        anchor = statistics.median([r[1] for r in results[f"curl {scheme}"]])
        synced = [r[1] for r in results[name]]
        rows.append([name, fmt([r[0] for r in results[name]]), fmt(synced), f"{statistics.median(synced) / anchor:.2f}",
                     fmt([r[2] for r in results[name]]), f"{max(r[3] for r in results[name]) / 1024:.1f} MiB"])
    for scheme in urls:
        best = min(statistics.median([r[1] for r in results[f"haul {scheme} -c{n}"]]) for n in (1, 8))
        report.ratios.append((f"A {scheme.upper()} vs curl+sync",
                              best / statistics.median([r[1] for r in results[f"curl {scheme}"]])))
    report.section(f"A over FTP and SFTP: the same {size // MIB} MiB file from vsftpd and OpenSSH's sshd",
                   "Ratios against curl on the same protocol (wall + sync). "
                   + ("" if ssh else "No SFTP rows: sshd is not installed or the run is not root. ")
                   + "aria2c has no SFTP row: it logs in only with a password (aria2 #1443), Haul and curl with a key.")
    report.table(["contender", "wall", "wall + sync", "x curl wall+sync", "CPU (user+sys)", "peak RSS"], rows)
    haul.stop()
    vsftpd.kill()


def scenario_b(args, report, work, disk):
    size = (8 if args.quick else 128) * MIB
    src = work + "/www/throttled.bin"
    expected = make_file(src, size)
    nginx, origin = start_nginx(work + "/www", work + "/nginx-b", "limit_rate 8m;")
    url = origin + "/throttled.bin"
    dest = work + "/b"
    os.makedirs(dest)
    haul = Haul(args.haul, work + "/haul-b", "--max-connections-per-host", "32")
    contenders = ["haul -c1", "haul -c4", "haul -c8", "haul -c16", "curl", "aria2c -x8", "aria2c -x16"]

    def run(name):
        out = f"{dest}/out.bin"
        if name.startswith("haul"):
            wall, _, out = haul.download(url, "out.bin", int(name.split("c")[-1]))
        elif name == "curl":
            wall, _, _ = timed(["curl", "-s", "-o", out, url])
        else:
            n = name.split("x")[-1]
            wall, _, _ = timed(["aria2c", "-q", f"-x{n}", f"-s{n}", "-k1M", "--file-allocation=none",
                                "--allow-overwrite=true", "-d", dest, "-o", "out.bin", url])
        if sha256(out) != expected:
            raise RuntimeError(f"{name} wrote a wrong file")
        os.remove(out)
        return wall

    results = rounds(contenders, 1, run)
    ideal = size / (8 * MIB)
    rows = []
    for name in contenders:
        n = int(name.split("c")[-1]) if name.startswith("haul") else (int(name.split("x")[-1]) if "x" in name else 1)
        rows.append([name, fmt(results[name]), f"{ideal / n:.2f} s"])
    haul8 = statistics.median(results["haul -c8"])
    haul16 = statistics.median(results["haul -c16"])
    report.ratios.append(("B x8 vs aria2", haul8 / statistics.median(results["aria2c -x8"])))
    report.ratios.append(("B x16 vs aria2", haul16 / statistics.median(results["aria2c -x16"])))
    report.section(f"B: one {size // MIB} MiB file, each connection limited to 8 MiB/s",
                   f"Haul/aria2: {haul8 / statistics.median(results['aria2c -x8']):.2f} at 8 connections, "
                   f"{haul16 / statistics.median(results['aria2c -x16']):.2f} at 16.")
    report.table(["contender", "wall", "ideal"], rows)
    haul.stop()
    nginx.terminate()
    os.remove(src)


def scenario_g(args, report, work, disk):
    size = (8 if args.quick else 128) * MIB
    src = work + "/www/uneven.bin"
    expected = make_file(src, size)
    # nginx numbers its connections; those ending in 0 or 5 (one in five) get 1 MiB/s, the others 8 MiB/s.
    nginx, origin = start_nginx(work + "/www", work + "/nginx-g", "limit_rate $uneven_rate;",
                                'map $connection $uneven_rate { "~[05]$" 1m; default 8m; }')
    url = origin + "/uneven.bin"
    dest = work + "/g"
    os.makedirs(dest)
    haul = Haul(args.haul, work + "/haul-g", "--max-connections-per-host", "32")
    contenders = ["haul -c8", "haul -c16", "aria2c -x8", "aria2c -x16"]
    if shutil.which("axel"):
        contenders += ["axel -n8", "axel -n16"]

    def run(name):
        out = f"{dest}/out.bin"
        n = name.rsplit("c" if name.startswith("haul") else ("x" if "aria" in name else "n"), 1)[-1]
        if name.startswith("haul"):
            wall, _, out = haul.download(url, "out.bin", int(n))
        elif name.startswith("aria2c"):
            wall, _, _ = timed(["aria2c", "-q", f"-x{n}", f"-s{n}", "-k1M", "--file-allocation=none",
                                "--allow-overwrite=true", "-d", dest, "-o", "out.bin", url])
        else:
            wall, _, _ = timed(["axel", "-q", "-n", n, "-o", out, url])
        if sha256(out) != expected:
            raise RuntimeError(f"{name} wrote a wrong file")
        os.remove(out)
        return wall

    results = rounds(contenders, 1 if args.quick else 3, run)

    def ideal(n):
        # n connections of which one in five is slow, none replaced: the file at their summed rate.
        return size / ((n - n / 5) * 8 * MIB + n / 5 * MIB)
    rows = [[name, fmt(results[name]), f"{ideal(int(''.join(filter(str.isdigit, name.split()[-1])))):.2f} s"]
            for name in contenders]
    ratio8 = statistics.median(results["haul -c8"]) / statistics.median(results["aria2c -x8"])
    ratio16 = statistics.median(results["haul -c16"]) / statistics.median(results["aria2c -x16"])
    report.ratios.append(("G uneven x8 vs aria2", ratio8))
    report.ratios.append(("G uneven x16 vs aria2", ratio16))
    report.section(f"G: one {size // MIB} MiB file, one connection in five limited to 1 MiB/s, the rest to 8 MiB/s",
                   f"nginx `map $connection` on `limit_rate`. Haul/aria2: {ratio8:.2f} at 8 connections, "
                   f"{ratio16:.2f} at 16. \"Even split\" is the time if the file were shared by rate over n "
                   "connections with n/5 slow ones kept to the end; replacing a slow connection can beat it.")
    report.table(["contender", "wall", "even split"], rows)
    haul.stop()
    nginx.terminate()
    os.remove(src)


def scenario_p(args, report, work, disk):
    """Play while it downloads: how soon a reader gets the MiB at 90% of a file still arriving."""
    size = (16 if args.quick else 128) * MIB
    rate = (2 if args.quick else 4) * MIB
    src = work + "/www/film.bin"
    expected = make_file(src, size)
    # TestOrigin paces each response from its first byte (nginx's limit_rate lets each request burst first, which
    # a client making a request per piece, as aria2's in-order selector does, turns into no limit at all).
    origin_proc = spawn([os.path.join(os.path.dirname(args.haul), "TestOrigin"), "--root", work + "/www"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = origin_proc.stdout.readline()
    url = line[line.index("http://"):].strip() + f"/files/film.bin?rate={rate}"
    first = size * 9 // 10
    last = first + MIB - 1
    haul = Haul(args.haul, work + "/haul-p", "--max-connections-per-host", "32")
    os.makedirs(work + "/aria-p", exist_ok=True)

    def run(name):
        start = time.time()
        if name == "haul -c8":
            d = haul.call("POST", "/downloads", {"url": url, "filename": "film.bin", "connections": 8})
            conn = http.client.HTTPConnection("127.0.0.1", haul.port, timeout=600)
            conn.request("GET", f"/downloads/{d['id']}/file", headers={"Range": f"bytes={first}-{last}"})
            reply = conn.getresponse()
            body = reply.read(1)
            ttfb = time.time() - start
            body += reply.read()
            got = time.time() - start
            if reply.status != 206 or len(body) != MIB:
                raise RuntimeError(f"haul answered {reply.status} with {len(body)} bytes")
            with open(src, "rb") as f:
                f.seek(first)
                if f.read(MIB) != body:
                    raise RuntimeError("haul answered other bytes than the file's")
            while d["state"] not in ("completed", "failed"):
                time.sleep(0.05)
                d = haul.call("GET", "/downloads/" + d["id"])
            if d["state"] != "completed" or sha256(f"{haul.root}/dl/film.bin") != expected:
                raise RuntimeError(f"haul's download failed: {d.get('error')}")
            whole = time.time() - start
            haul.call("DELETE", "/downloads/" + d["id"] + "?delete_file=true")
            return (ttfb, got, whole)
        # aria2 in order: a reader of its file has the MiB once the file holds the source's bytes there.
        out = work + "/aria-p/film.bin"
        proc = spawn(["aria2c", "-q", "-x8", "-s8", "-k1M", "--stream-piece-selector=inorder",
                      "--file-allocation=none", "--allow-overwrite=true", "-d", work + "/aria-p", "-o", "film.bin",
                      url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(src, "rb") as f:
            f.seek(first)
            wanted = f.read(MIB)
        got = None
        while proc.poll() is None:
            if got is None and os.path.exists(out):
                with open(out, "rb") as f:
                    f.seek(first)
                    if f.read(MIB) == wanted:
                        got = time.time() - start
            time.sleep(0.02)
        whole = time.time() - start
        if proc.returncode != 0 or sha256(out) != expected:
            raise RuntimeError("aria2c's download failed")
        os.remove(out)
        got = got or whole
        return (got, got, whole)

    contenders = ["haul -c8", "aria2c -x8 inorder"]
    results = {name: [] for name in contenders}
    for _ in range(1 if args.quick else 3):
        for name in contenders:
            results[name].append(run(name))
    rows = []
    for name in contenders:
        first_byte = statistics.median(r[0] for r in results[name])
        mib = statistics.median(r[1] for r in results[name])
        whole = statistics.median(r[2] for r in results[name])
        rows.append([name, f"{first_byte:.2f} s", f"{mib:.2f} s", f"{whole:.2f} s", f"{mib / whole:.2f}"])
    haul_mib = statistics.median(r[1] for r in results["haul -c8"])
    aria_mib = statistics.median(r[1] for r in results["aria2c -x8 inorder"])
    report.ratios.append(("P MiB at 90% vs aria2 inorder", haul_mib / aria_mib))
    report.section(f"P: the MiB at 90% of a {size // MIB} MiB file while it downloads, 8 connections of {rate // MIB} MiB/s",
                   f"Haul answers the range as it lands, fetching it first; a reader of aria2's file "
                   f"(stream-piece-selector=inorder) has it once the file holds it. Haul/aria2 for that MiB: "
                   f"{haul_mib / aria_mib:.2f}.")
    report.table(["contender", "first byte", "the MiB", "whole download", "MiB / whole"], rows)
    haul.stop()
    origin_proc.terminate()
    os.remove(src)


def scenario_v(args, report, work, disk):
    """An HLS VOD of 300 one-second segments from an origin that serves each request at a limited rate."""
    count = 20 if args.quick else 300
    rate, shown = (4 * MIB, "4 MiB/s") if args.quick else (MIB // 2, "512 KiB/s")
    www = work + "/www-v"
    os.makedirs(www)
    os.chmod(www, 0o755)
    # Made by ffmpeg (the fixture tool and the contender): 1 s segments of a 640x360 test pattern with sound.
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc=duration={count}:size=640x360:rate=25", "-f", "lavfi", "-i",
                    f"sine=frequency=440:duration={count}", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
                    "-b:v", "1500k", "-c:a", "aac", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
                    "-hls_segment_filename", www + "/seg%04d.ts", www + "/index.m3u8"], check=True)
    names = sorted(n for n in os.listdir(www) if n.endswith(".ts"))
    h = hashlib.sha256()
    for name in names:
        with open(f"{www}/{name}", "rb") as f:
            h.update(f.read())
    expected = h.hexdigest()
    size = sum(os.path.getsize(f"{www}/{n}") for n in names)
    # TestOrigin paces each response from its first byte (nginx's limit_rate lets a small response out in one
    # burst): each segment's URI asks for the rate.
    with open(www + "/index.m3u8") as f:
        lines = f.read().splitlines()
    with open(www + "/index.m3u8", "w") as f:
        f.write("\n".join(line if line.startswith("#") or not line else f"{line}?rate={rate}" for line in lines)
                + "\n")
    origin_proc = spawn([os.path.join(os.path.dirname(args.haul), "TestOrigin"), "--root", www],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = origin_proc.stdout.readline()
    url = line[line.index("http://"):].strip() + "/files/index.m3u8"
    haul = Haul(args.haul, work + "/haul-v", "--max-connections-per-host", "32")
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "venv", "bin", "yt-dlp")
    out = work + "/out-v"
    os.makedirs(out, exist_ok=True)

    def run(name):
        target = f"{out}/video.ts"
        if os.path.exists(target):
            os.remove(target)
        if name == "haul -c8":
            wall, cpu, path = haul.download(url, "video.ts", 8)
            if sha256(path) != expected:
                raise RuntimeError("haul's file is not the segments joined")
            os.remove(path)
            return wall, cpu
        if name == "ffmpeg -c copy":
            wall, cpu, _ = timed(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", url, "-c", "copy",
                                  target])
        else:
            # Its own HLS downloader, the fragments joined as they are (no ffmpeg fix-up afterwards).
            wall, cpu, _ = timed([venv, "-q", "--no-part", "--hls-prefer-native", "--fixup", "never",
                                  "--concurrent-fragments", "8", "-o", target, url])
            if sha256(target) != expected:
                raise RuntimeError("yt-dlp's file is not the segments joined")
        if not os.path.exists(target) or os.path.getsize(target) < size // 2:
            raise RuntimeError(f"{name} wrote no whole file")
        return wall, cpu

    contenders = ["haul -c8", "ffmpeg -c copy", "yt-dlp -N8"]
    if not os.access(venv, os.X_OK):
        contenders.remove("yt-dlp -N8")
        CONTENDER_FAILURES.append(f"yt-dlp -N8: not installed at {venv} (scripts/venv.sh)")
    results = rounds(contenders, 1 if args.quick else 3, run, warm_up=False)
    rows = []
    for name in contenders:
        rows.append([name, fmt([r[0] for r in results[name]]), fmt([r[1] for r in results[name]])])
    haul_wall = statistics.median(r[0] for r in results["haul -c8"])
    ffmpeg_wall = statistics.median(r[0] for r in results["ffmpeg -c copy"])
    report.ratios.append(("V HLS wall vs ffmpeg", haul_wall / ffmpeg_wall))
    note = (f"{count} segments, {size / MIB:.1f} MiB, each segment served at {shown} by TestOrigin. Haul fetches 8 "
            f"segments at once into one .ts (the segments' bytes, checked by sha256); ffmpeg reads one at a time "
            f"and remuxes; yt-dlp's native downloader fetches 8 at once. Haul/ffmpeg wall: {haul_wall / ffmpeg_wall:.2f}")
    if "yt-dlp -N8" in contenders:
        ytdlp_wall = statistics.median(r[0] for r in results["yt-dlp -N8"])
        note += f"; Haul/yt-dlp: {haul_wall / ytdlp_wall:.2f}"
    report.section(f"V: an HLS playlist of {count} segments", note + ". CPU: the process's (Haul's server's) own.")
    report.table(["contender", "wall", "CPU"], rows)
    haul.stop()
    origin_proc.terminate()
    shutil.rmtree(www, ignore_errors=True)


def scenario_t(args, report, work, disk):
    """A torrent from one local seeder (python3-libtorrent) found through a local tracker (opentracker): Haul
    against aria2c, each fetching it whole into a folder of its own."""
    size = 16 * MIB if args.quick else int(os.environ.get("BENCH_TORRENT_MIB", "1024")) * MIB
    base = work + "/t"
    content = base + "/seed"
    os.makedirs(content)
    make_file(content + "/big.bin", size)
    expected = sha256(content + "/big.bin")
    port = free_port()
    torrent = base + "/big.torrent"
    subprocess.run(["mktorrent", "-l", "20", "-a", f"http://127.0.0.1:{port}/announce", "-o", torrent,
                    content + "/big.bin"], check=True, stdout=subprocess.DEVNULL)
    info_hash = subprocess.run(["/usr/bin/python3", "-c", "import libtorrent,sys; "
                                "print(libtorrent.torrent_info(sys.argv[1]).info_hashes().v1)", torrent],
                               check=True, capture_output=True, text=True).stdout.strip()
    # Debian's opentracker tracks only what its whitelist names, read inside its chroot.
    with open(base + "/whitelist", "w") as f:
        f.write(info_hash + "\n")
    os.chmod(base, 0o755)
    os.chmod(base + "/whitelist", 0o644)
    spawn(["opentracker", "-i", "127.0.0.1", "-p", str(port), "-P", str(port), "-d", base, "-w", "whitelist"],
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, "opentracker")
    seeder = spawn(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests",
                                                    "Servers", "torrent_seeder.py"),
                    "--torrent", torrent, "--data", content, "--status", base + "/seeder.json"],
                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seeder.stdout.readline()
    with open(torrent, "rb") as f:
        encoded = base64.b64encode(f.read()).decode()
    haul = Haul(args.haul, base + "/haul", "--bittorrent", "--bittorrent-listen", "127.0.0.1:0")
    peaks = {}

    def run(name):
        out = f"{base}/out-{name.split()[0]}"
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        if name == "haul":
            cpu0 = proc_stat(haul.proc.pid)[0]
            start = time.time()
            d = haul.call("POST", "/downloads", {"torrent": encoded})
            while d["state"] not in ("completed", "failed"):
                if time.time() - start > 600:
                    raise RuntimeError("haul did not finish the torrent in 10 minutes")
                time.sleep(0.02)
                d = haul.call("GET", "/downloads/" + d["id"])
            if d["state"] != "completed":
                raise RuntimeError(f"haul failed: {d['error']}")
            wall = datetime.datetime.fromisoformat(d["completed_at"].replace("Z", "+00:00")).timestamp() - start
            cpu = proc_stat(haul.proc.pid)[0] - cpu0
            path = f"{haul.root}/dl/big.bin"
            if sha256(path) != expected:
                raise RuntimeError("haul's file differs from the seeder's")
            haul.call("DELETE", f"/downloads/{d['id']}?delete_file=true")
            peaks[name] = haul.peak_rss()
            return wall, cpu
        elif name == "transmission-cli":
            # In a network namespace of its own: Transmission drops loopback peers (bench/torrent_netns.py).
            answer = subprocess.run(["unshare", "-rn", "/usr/bin/python3", os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "torrent_netns.py"), "--file", content + "/big.bin",
                "--work", f"{base}/netns-{time.monotonic_ns()}", "--out", out],
                capture_output=True, text=True, timeout=900)
            if answer.returncode != 0:
                raise RuntimeError(f"transmission-cli's run failed: {answer.stderr.strip()[-300:]}")
            measured = json.loads(answer.stdout)
            wall, cpu, peak = measured["wall"], measured["cpu"], measured["peak_kib"]
        else:
            wall, cpu, peak = timed(["aria2c", "-q", "--enable-dht=false", "--enable-dht6=false",
                                     "--bt-enable-lpd=false", "--enable-peer-exchange=false", "--seed-time=0",
                                     "--bt-stop-timeout=60",
                                     "--file-allocation=none", f"--listen-port={free_port()}", "-d", out, torrent])
        if sha256(out + "/big.bin") != expected:
            raise RuntimeError(f"{name}'s file differs from the seeder's")
        peaks[name] = peak
        return wall, cpu

    contenders = ["haul", "aria2c", "transmission-cli"]
    if args.quick:
        contenders.remove("transmission-cli")
    elif shutil.which("transmission-cli") is None or subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        contenders.remove("transmission-cli")
        CONTENDER_FAILURES.append("transmission-cli: needs transmission-cli and unshare -rn (a network namespace)")
    results = rounds(contenders, 1 if args.quick else 3, run, warm_up=False)
    rows = [[name, fmt([r[0] for r in results[name]]), fmt([r[1] for r in results[name]]),
             f"{peaks.get(name, 0) / 1024:.1f} MiB"] for name in contenders]
    haul_wall = statistics.median(r[0] for r in results["haul"])
    ratios = {name: haul_wall / statistics.median(r[0] for r in results[name])
              for name in contenders[1:] if name in results}
    for name, ratio in ratios.items():
        report.ratios.append((f"T torrent wall vs {name}", ratio))
    report.section(
        f"T: a {size // MIB} MiB torrent from a local seeder",
        "One seeder (a libtorrent session of Debian's python3-libtorrent) on 127.0.0.1, found through opentracker; "
        "no DHT, local discovery or peer exchange anywhere; 1 MiB pieces. Each contender fetches the whole file "
        "into a folder of its own (sha256 checked). Wall: Haul's from the POST to completed_at, aria2c's process "
        "until it exits (--seed-time=0), transmission-cli's until its finish script stops it. transmission-cli "
        "runs in a network namespace of its own (unshare -rn) where the loopback device also has 10.77.0.1, with "
        "its own seeder and a minimal tracker there: Transmission drops peers at loopback addresses, so on "
        "127.0.0.1 it finds none; its wall includes the seconds it waits before connecting to the peer it was "
        "given (about 12 s here, whatever the size). CPU: the process's own; "
        "peak RSS: the process's (Haul's over the whole run). "
        + "; ".join(f"Haul/{name} wall: {ratio:.2f}" for name, ratio in ratios.items()))
    report.table(["contender", "wall", "CPU", "peak RSS"], rows)
    haul.stop()
    seeder.stdin.close()
    seeder.wait(timeout=10)


def scenario_j(args, report, work, disk):
    size = (8 if args.quick else 128) * MIB
    src = work + "/www/tls.bin"
    expected = make_file(src, size)
    cert, key = work + "/tls.crt", work + "/tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=haul-bench"], check=True, capture_output=True)
    tls = f"ssl_certificate {cert}; ssl_certificate_key {key}; limit_rate 8m;"
    h2_nginx, h2 = start_nginx(work + "/www", work + "/nginx-j2", tls, listen_extra=" ssl http2")
    h1_nginx, h1 = start_nginx(work + "/www", work + "/nginx-j1", tls, listen_extra=" ssl")
    dest = work + "/j"
    os.makedirs(dest)
    haul = Haul(args.haul, work + "/haul-j", "--max-connections-per-host", "32")
    contenders = ["haul -c8 h2", "haul -c8 h1.1", "aria2c -x8 h1.1", "curl h2"]

    def run(name):
        out = f"{dest}/out.bin"
        url = (h2 if name.endswith("h2") else h1) + "/tls.bin"
        if name.startswith("haul"):
            wall, _, out = haul.download(url, "out.bin", 8, insecure=True)
        elif name.startswith("curl"):
            wall, _, _ = timed(["curl", "-sk", "--http2", "-o", out, url])
        else:
            wall, _, _ = timed(["aria2c", "-q", "-x8", "-s8", "-k1M", "--file-allocation=none",
                                "--check-certificate=false", "--allow-overwrite=true", "-d", dest, "-o", "out.bin",
                                url])
        if sha256(out) != expected:
            raise RuntimeError(f"{name} wrote a wrong file")
        os.remove(out)
        return wall

    results = rounds(contenders, 1 if args.quick else 3, run)
    rows = [[name, fmt(results[name]), f"{size / ((1 if name.startswith('curl') else 8) * 8 * MIB):.2f} s"]
            for name in contenders]
    h2x8 = statistics.median(results["haul -c8 h2"])
    ratio = h2x8 / statistics.median(results["haul -c8 h1.1"])
    report.ratios.append(("J TLS h2 x8 vs h1.1 x8", ratio))
    report.ratios.append(("J TLS h2 x8 vs aria2", h2x8 / statistics.median(results["aria2c -x8 h1.1"])))
    report.section(f"J: one {size // MIB} MiB file over TLS, each request limited to 8 MiB/s, HTTP/2 and HTTP/1.1",
                   f"nginx `listen ssl http2` and `listen ssl`, `limit_rate` per request (per stream on h2). Haul "
                   f"h2 x8 (eight streams, one connection) / h1.1 x8 (eight connections): {ratio:.2f}.")
    report.table(["contender", "wall", "ideal"], rows)
    haul.stop()
    h2_nginx.terminate()
    h1_nginx.terminate()
    os.remove(src)


def scenario_k(args, report, work, disk):
    """Lists: N URLs of one size added by batch, against aria2c -i and curl -Z on the same list."""
    counts = [int(c) for c in args.list_counts.split(",")] if args.list_counts else \
        ([20] if args.quick else [1000, 10000, 100000])
    places = [(label, base) for label, base in (("tmpfs", work), ("disk", disk))
              if label in args.list_places.split(",")]
    rows, per_file = [], {}
    for label, base in places:
        for size in (4096, 65536):
            www = f"{base}/www-k"
            os.makedirs(www)
            os.chmod(www, 0o755)
            digest = make_file(f"{www}/one.bin", size)
            # One file under every name: 100,000 sources would cost the page cache what the results do.
            nginx, origin = start_nginx(www, f"{base}/nginx-k", "location /l/ { try_files /one.bin =404; }")
            for count in counts:
                names = [f"f{i:06d}.bin" for i in range(count)]
                urls = [f"{origin}/l/{name}" for name in names]
                with open(f"{base}/k-list.txt", "w") as f:
                    f.write("\n".join(urls) + "\n")
                with open(f"{base}/k-curl.cfg", "w") as f:
                    f.write("".join(f'url = "{url}"\n' for url in urls))

                def check(directory):
                    for name in names:
                        if sha256(f"{directory}/{name}") != digest:
                            raise RuntimeError(f"wrong file {name}")
                    shutil.rmtree(directory)

                def run(name):
                    out = f"{base}/out-k"
                    os.makedirs(out)
                    if name == "haul":
                        haul = Haul(args.haul, f"{base}/haul-k", "--max-active", "16", "--connections", "1",
                                    "--max-downloads", str(count))
                        cpu0 = proc_stat(haul.proc.pid)[0]
                        start = time.monotonic()
                        for i in range(0, count, 1000):
                            added = haul.call("POST", "/downloads",
                                              {"downloads": [{"url": url} for url in urls[i:i + 1000]]})
                            if added["created"] != len(urls[i:i + 1000]):
                                raise RuntimeError(f"haul added {added['created']} of a batch")
                        haul.wait_all(count, poll=0.02)
                        wall = time.monotonic() - start
                        cpu, rss = proc_stat(haul.proc.pid)
                        haul.stop()
                        os.rmdir(out)
                        check(f"{base}/haul-k/dl")
                        shutil.rmtree(f"{base}/haul-k")
                        return wall, cpu - cpu0, rss
                    if name == "aria2c -i -j16":
                        result = timed(["aria2c", "-q", "-i", f"{base}/k-list.txt", "-j16", "--file-allocation=none",
                                        "-d", out])
                    else:
                        result = timed(["curl", "-s", "-Z", "--parallel-max", "16", "--remote-name-all", "-K",
                                        f"{base}/k-curl.cfg"], cwd=out)
                    check(out)
                    return result

                contenders = ["haul", "aria2c -i -j16", "curl -Z"]
                results = rounds(contenders, 1 if args.quick or count > 1000 else 3, run, warm_up=count <= 1000)
                walls = {name: statistics.median(r[0] for r in values) for name, values in results.items()}
                for name, values in results.items():
                    cpu = statistics.median(r[1] for r in values) / count
                    rss = max(r[2] for r in values)
                    rows.append([label, f"{size // 1024} KiB", f"{count:,}", name, fmt([r[0] for r in values]),
                                 f"{cpu * 1000:.3f} ms", f"{rss / 1024:.1f} MiB",
                                 f"{walls[name] / walls['aria2c -i -j16']:.2f}",
                                 f"{walls[name] / walls['curl -Z']:.2f}"])
                    if name == "haul":
                        per_file[(label, size, count)] = cpu
                if count == 1000 and size == 65536:
                    report.ratios.append((f"K 1,000 x 64 KiB {label} vs aria2", walls["haul"] / walls["aria2c -i -j16"]))
                    report.ratios.append((f"K 1,000 x 64 KiB {label} vs curl -Z", walls["haul"] / walls["curl -Z"]))
            nginx.terminate()
            shutil.rmtree(www)
    growth = []
    for (label, size, count), cpu in per_file.items():
        first = per_file.get((label, size, counts[0]))
        if count != counts[0] and first:
            growth.append([label, f"{size // 1024} KiB", f"{count:,} / {counts[0]:,}", f"{cpu / first:.2f}"])
            if count == counts[-1] and size == 65536 and label == "tmpfs":
                report.ratios.append((f"K CPU per file {count:,} vs {counts[0]:,}", cpu / first))
    report.section("K: lists of URLs added by batch, 16 at a time",
                   "Haul: POST /downloads in batches of 1,000 (one connection each, 16 running), then until the "
                   "last completes; CPU is the server's from /proc, per file. aria2c -i list -j16 and curl -Z "
                   "--parallel-max 16 -K list: the whole process. One nginx serves one file under every name; "
                   "every result's sha256 is checked. Peak RSS is the process's (the server's for Haul).")
    report.table(["where", "size", "files", "contender", "wall", "CPU per file", "peak RSS", "x aria2", "x curl"],
                 rows)
    if growth:
        report.lines += ["", "Haul's server CPU per file against the shortest list:", ""]
        report.table(["where", "size", "files", "CPU per file ratio"], growth)


PROBER = """
import http.client, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
times = []
end = time.monotonic() + seconds
while time.monotonic() < end:
    t = time.monotonic()
    c.request("GET", "/healthz")
    c.getresponse().read()
    times.append(time.monotonic() - t)
    time.sleep(0.002)
times.sort()
print(len(times), times[-1], times[int(len(times) * 0.99)], sum(1 for t in times if t > 0.05))
"""


def scenario_w(args, report, work, disk):
    hooks, count = (10, 50) if args.quick else (100, 1000)
    nginx, receiver = start_nginx(work + "/www", work + "/nginx-w", "location / { return 204; }")
    haul = Haul(args.haul, f"{disk}/haul-w", "--max-downloads", str(10 * count))
    for i in range(hooks):
        haul.call("POST", "/webhooks", {"url": f"{receiver}/hook{i}", "events": ["created", "removed", "state"]})
    prober = spawn([sys.executable, "-c", PROBER, str(haul.port), "4" if args.quick else "15"],
                   stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    items = [{"url": f"http://127.0.0.1:9/k{i}.bin", "start_paused": True} for i in range(count)]
    start = time.monotonic()
    added = haul.call("POST", "/downloads", {"downloads": items})
    add_time = time.monotonic() - start
    if added["created"] != count:
        raise RuntimeError(f"haul added {added['created']} of {count}")
    time.sleep(1)
    start = time.monotonic()
    removed = haul.call("DELETE", "/downloads?state=paused")
    delete_time = time.monotonic() - start
    if len(removed["removed"]) != count:
        raise RuntimeError(f"haul removed {len(removed['removed'])} of {count}")
    probes, worst, p99, over = prober.communicate()[0].split()
    start = time.monotonic()
    expected = 2 * hooks * count

    def outbox():
        connection = http.client.HTTPConnection("127.0.0.1", haul.port, timeout=60)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        connection.close()
        return {line.split('"')[1]: int(float(line.split()[-1])) for line in text.splitlines()
                if line.startswith("haul_webhook_deliveries{")}
    while outbox().get("pending", 1) > 0:
        if time.monotonic() - start > 600:
            raise RuntimeError("the webhook outbox did not drain in 10 minutes")
        time.sleep(0.5)
    drain = time.monotonic() - start
    store = sum(os.path.getsize(f"{disk}/haul-w/data/{name}") for name in os.listdir(f"{disk}/haul-w/data"))
    rss = haul.peak_rss()
    haul.stop()
    nginx.terminate()
    shutil.rmtree(f"{disk}/haul-w")
    report.section(f"W: {hooks} webhooks, {count} downloads added as one batch and removed with one DELETE",
                   f"{expected:,} deliveries (created and removed for each webhook) to an nginx answering 204; "
                   "/healthz asked every 2 ms by another process throughout.")
    report.table(["measure", "value"], [
        ["POST of the batch answered", f"{add_time * 1000:.0f} ms"],
        ["DELETE ?state=paused answered", f"{delete_time * 1000:.0f} ms"],
        ["/healthz worst / p99", f"{float(worst) * 1000:.0f} ms / {float(p99) * 1000:.1f} ms"],
        ["/healthz over 50 ms", f"{over} of {probes}"],
        ["outbox drained after the DELETE", f"{drain:.1f} s ({expected / max(drain, 0.001):,.0f}/s overall)"],
        ["store (SQLite, -wal included) at the end", f"{store / MIB:.1f} MiB"],
        ["server peak RSS", f"{rss / 1024:.1f} MiB"],
    ])


def scenario_c(args, report, work, disk):
    count = 20 if args.quick else 1000
    rows = []
    for label, base in (("tmpfs", work), ("disk", disk)):
        www = f"{base}/www-c"
        os.makedirs(www)
        os.chmod(www, 0o755)
        hashes = {f"f{i:04d}.bin": make_file(f"{www}/f{i:04d}.bin", 64 * 1024) for i in range(count)}
        nginx, origin = start_nginx(www, f"{base}/nginx-c")
        urls = [f"{origin}/{name}" for name in hashes]
        with open(f"{base}/list.txt", "w") as f:
            f.write("\n".join(urls) + "\n")

        def check(directory):
            for name, digest in hashes.items():
                if sha256(f"{directory}/{name}") != digest:
                    raise RuntimeError(f"wrong file {name}")
            shutil.rmtree(directory)

        def run(name):
            out = f"{base}/out-c"
            os.makedirs(out, exist_ok=True)
            if name == "haul":
                haul = Haul(args.haul, f"{base}/haul-c", "--max-active", "16", "--connections", "1")
                start = time.monotonic()
                for url in urls:
                    haul.call("POST", "/downloads", {"url": url})
                haul.wait_all(count, poll=0.005)
                wall = time.monotonic() - start
                haul.stop()
                shutil.rmtree(out)
                check(f"{base}/haul-c/dl")
                shutil.rmtree(f"{base}/haul-c")
                return wall
            if name == "aria2c -j16":
                wall, _, _ = timed(["aria2c", "-q", "-i", f"{base}/list.txt", "-j16", "--file-allocation=none",
                                    "-d", out])
            else:
                wall, _, _ = timed(["curl", "-s", "-Z", "--parallel-max", "16", "--remote-name-all", *urls], cwd=out)
            check(out)
            return wall

        results = rounds(["haul", "aria2c -j16", "curl -Z"], 1 if args.quick else 3, run)
        aria = statistics.median(results["aria2c -j16"])
        for name, values in results.items():
            rows.append([label, name, fmt(values), f"{statistics.median(values) / aria:.2f}"])
        report.ratios.append((f"C small files {label} vs aria2", statistics.median(results["haul"]) / aria))
        nginx.terminate()
        shutil.rmtree(www)
    report.section(f"C: {count} files of 64 KiB, 16 at a time",
                   "Haul: one POST per file over one keep-alive connection, then until the last completes.")
    report.table(["where", "contender", "wall", "x aria2"], rows)
    scenario_c_file_transfer(args, report, work, count)


def scenario_c_file_transfer(args, report, work, count):
    """Scenario C's files over FTP (vsftpd) and SFTP (sshd), on tmpfs: Haul against aria2c (FTP only: it has no
    SFTP key login) and curl -Z on the same list."""
    www = f"{work}/www-cft"
    os.makedirs(www)
    os.chmod(www, 0o755)
    hashes = {f"f{i:04d}.bin": make_file(f"{www}/f{i:04d}.bin", 64 * 1024) for i in range(count)}
    vsftpd, ftp = start_vsftpd(www, f"{work}/vsftpd-c")
    ssh = SSHServer(f"{work}/sshd-c") if SSHServer.available() else None
    lists = {"ftp": [f"{ftp}/{name}" for name in hashes]}
    if ssh:
        lists["sftp"] = [ssh.url(f"{www}/{name}") for name in hashes]
    rows = []

    def check(directory):
        for name, digest in hashes.items():
            if sha256(f"{directory}/{name}") != digest:
                raise RuntimeError(f"wrong file {name}")
        shutil.rmtree(directory)

    for scheme, urls in lists.items():
        with open(f"{work}/list-{scheme}.txt", "w") as f:
            f.write("\n".join(urls) + "\n")

        def run(name):
            out = f"{work}/out-cft"
            os.makedirs(out, exist_ok=True)
            if name == "haul":
                haul = Haul(args.haul, f"{work}/haul-cft", "--max-active", "16", "--connections", "1",
                            *(ssh.haul_options() if scheme == "sftp" else []))
                start = time.monotonic()
                haul.call("POST", "/downloads", {"downloads": [{"url": url} for url in urls]})
                haul.wait_all(count, poll=0.005)
                wall = time.monotonic() - start
                haul.stop()
                shutil.rmtree(out)
                check(f"{work}/haul-cft/dl")
                shutil.rmtree(f"{work}/haul-cft")
                return wall
            if name == "aria2c -j16":
                # --timeout=5: with vsftpd, aria2c waits out its timeout (60 s) for the 226 of a few sessions
                # whose bytes it already has (3 of 20 in a trial); its row would measure that wait, not transfers.
                wall, _, _ = timed(["aria2c", "-q", "-i", f"{work}/list-{scheme}.txt", "-j16", "--timeout=5",
                                    "--file-allocation=none", "-d", out])
            else:
                wall, _, _ = timed(["curl", "-s", "-Z", "--parallel-max", "16", "--remote-name-all",
                                    *(ssh.curl_options() if scheme == "sftp" else []), *urls], cwd=out)
            check(out)
            return wall

        contenders = ["haul", "curl -Z"] + (["aria2c -j16"] if scheme == "ftp" else [])
        results = rounds(contenders, 1 if args.quick else 3, run)
        curl = statistics.median(results["curl -Z"])
        aria = statistics.median(results["aria2c -j16"]) if "aria2c -j16" in results else None
        for name, values in results.items():
            rows.append([scheme, name, fmt(values), f"{statistics.median(values) / curl:.2f}",
                         f"{statistics.median(values) / aria:.2f}" if aria else "-"])
        report.ratios.append((f"C small files {scheme.upper()} vs " + ("aria2" if aria else "curl"),
                              statistics.median(results["haul"]) / (aria or curl)))
    report.section(f"C over FTP and SFTP: {count} files of 64 KiB, 16 at a time, on tmpfs",
                   "Haul: the list as one batch POST, then until the last completes. "
                   + ("" if ssh else "No SFTP rows: sshd is not installed or the run is not root. ")
                   + "aria2c has no SFTP row: it logs in only with a password (aria2 #1443); it runs with "
                   "--timeout=5, as it waits out its timeout for the 226 of some vsftpd sessions.")
    report.table(["protocol", "contender", "wall", "x curl", "x aria2"], rows)
    vsftpd.kill()
    shutil.rmtree(www)


def start_postgres(base):
    """A PostgreSQL of the bench's own: initdb in `base`, a Unix socket there only, as the postgres user under root
    (the server refuses root). Returns the process's stop function and a libpq URL of its database."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise RuntimeError("PostgreSQL is not installed (make test installs Debian's postgresql)")
    bindir = os.path.dirname(bins[-1])
    os.makedirs(f"{base}/socket")
    as_postgres = []
    if os.getuid() == 0:
        import pwd
        user = pwd.getpwnam("postgres")
        for path in (base, f"{base}/socket"):
            os.chown(path, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(as_postgres + [f"{bindir}/initdb", "-D", f"{base}/data", "-A", "trust", "-U", "postgres",
                                  "--no-sync", "-E", "UTF8", "--locale=C"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(as_postgres + [f"{bindir}/pg_ctl", "-D", f"{base}/data", "-l", f"{base}/server.log", "-w",
                                  "start", "-o", f"-k {base}/socket -c listen_addresses=''"],
                   check=True, stdout=subprocess.DEVNULL)

    def stop():
        if stop in CLEANUPS:
            CLEANUPS.remove(stop)
            subprocess.run(as_postgres + [f"{bindir}/pg_ctl", "-D", f"{base}/data", "-m", "immediate", "stop"],
                           check=False, stdout=subprocess.DEVNULL)

    CLEANUPS.append(stop)
    return stop, f"postgresql:///postgres?host={base}/socket&user=postgres"


def scenario_i(args, report, work, disk):
    """Scenario C's small files, on one node with SQLite and on 1, 2 and 3 nodes sharing a PostgreSQL."""
    count = 20 if args.quick else 600
    www = f"{work}/www-i"
    os.makedirs(www)
    os.chmod(www, 0o755)
    hashes = {f"f{i:04d}.bin": make_file(f"{www}/f{i:04d}.bin", 64 * 1024) for i in range(count)}
    nginx, origin = start_nginx(www, f"{work}/nginx-i")
    stop_postgres, url = start_postgres(f"{work}/pg-i")
    rows = []
    try:
        def run(name):
            nodes = int(name.split()[0])
            root = f"{work}/haul-i"
            store = [] if "SQLite" in name else ["--store", url]
            if store:
                # A fresh database each round: drop what the last round left.
                subprocess.run(["psql", url, "-q", "-c", "DROP SCHEMA public CASCADE; CREATE SCHEMA public"],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            hauls = [Haul(args.haul, f"{root}/n{i}", "--max-active", "16", "--connections", "1",
                          "--download-dir", f"{root}/dl", *store, "--node", f"n{i}") for i in range(nodes)]
            cpu = [proc_stat(h.proc.pid)[0] for h in hauls]
            start = time.monotonic()
            for index, name_ in enumerate(hashes):
                hauls[index % nodes].call("POST", "/downloads", {"url": f"{origin}/{name_}"})
            hauls[0].wait_all(count, poll=0.005)
            wall = time.monotonic() - start
            used = sum(proc_stat(h.proc.pid)[0] - c for h, c in zip(hauls, cpu))
            for h in hauls:
                h.stop()
            for file, digest in hashes.items():
                if sha256(f"{root}/dl/{file}") != digest:
                    raise RuntimeError(f"wrong file {file}")
            shutil.rmtree(root)
            return wall, used

        contenders = ["1 node, SQLite", "1 node", "2 nodes", "3 nodes"]
        walls = {name: [] for name in contenders}
        cpus = {name: [] for name in contenders}
        for _ in range(1 if args.quick else 3):
            for name in contenders:
                wall, used = run(name)
                walls[name].append(wall)
                cpus[name].append(used)
        base = statistics.median(walls["1 node, SQLite"])
        for name in contenders:
            rows.append([name, fmt(walls[name]), f"{statistics.median(walls[name]) / base:.2f}",
                         f"{statistics.median(cpus[name]) / count * 1000:.2f} ms"])
    finally:
        stop_postgres()
        nginx.terminate()
    report.section(f"I: {count} files of 64 KiB on several nodes",
                   "POSTs spread over the nodes (one download directory, PostgreSQL on a Unix socket), 16 at a "
                   "time per node, until the last completes; CPU is all nodes' per file. On 2 cores the nodes, "
                   "PostgreSQL and nginx share the same two cores.")
    report.table(["nodes", "wall", "x 1 node SQLite", "server CPU per file"], rows)


def wrk(url, seconds, script=None, clients=32):
    """Requests per second and the 50th and 99th percentile latencies (ms) from wrk."""
    cmd = ["wrk", f"-t{min(2, clients)}", f"-c{clients}", f"-d{seconds}s", "--latency"] + (["-s", script] if script else []) + [url]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"{url} answered errors under wrk:\n{out}")
    rps = float(next(l for l in out.splitlines() if l.startswith("Requests/sec:")).split()[1])

    def percentile(p):
        line = next(l for l in out.splitlines() if l.strip().startswith(p))
        value = line.split()[1]
        for suffix, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
            if value.endswith(suffix):
                return float(value[:-len(suffix)]) * scale
        return float(value)
    return rps, percentile("50%"), percentile("99%")


class EventWatch:
    """One event-stream client in a thread of its own: the arrival time of each progress event about `download`."""
    def __init__(self, port, download):
        self.times, self.download = [], download
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        buffer, kind = b"", None
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"event: "):
                    kind = line[7:].strip()
                elif line.startswith(b"data: ") and kind == b"progress" and self.download.encode() in line[:40]:
                    self.times.append(time.monotonic())

    def stop(self):
        self.sock.close()
        self.thread.join(timeout=5)
        gaps = [b - a for a, b in zip(self.times, self.times[1:])]
        return len(self.times), max(gaps) if gaps else float("nan")


def scenario_d(args, report, work, disk):
    seconds = 1 if args.quick else 10
    size = (4 if args.quick else 64) * MIB
    listed = 10 if args.quick else 100
    for i in range(4):
        make_file(f"{work}/www/d{i}.bin", size)
    nginx, origin = start_nginx(work + "/www", work + "/nginx-d", "limit_rate 1m;")
    rows = []
    haul = Haul(args.haul, work + "/haul-d")
    target = haul.call("POST", "/downloads", {"url": origin + "/d0.bin", "filename": "idle.bin",
                                              "start_paused": True})["id"]
    haul.call("POST", "/downloads", {"downloads": [{"url": f"{origin}/d0.bin", "filename": f"p{i}.bin",
                                                    "start_paused": True} for i in range(listed - 1)]})
    base = f"http://127.0.0.1:{haul.port}"
    status, listing = f"{base}/downloads/{target}", f"{base}/downloads?limit={listed}"

    def script(name, method, params):
        path = f"{work}/{name}.lua"
        with open(path, "w") as f:
            f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                    f"wrk.body = '{json.dumps({'jsonrpc': '2.0', 'id': '1', 'method': method, 'params': params})}'\n")
        return path
    # The same download's status through Haul's aria2 front, by the call aria2 is measured with below.
    waiting = haul.call("POST", "/jsonrpc", {"jsonrpc": "2.0", "id": "1", "method": "aria2.tellWaiting",
                                             "params": [0, listed, ["gid", "files"]]})["result"]
    haul_gid = next(d["gid"] for d in waiting if d["files"][0]["path"].endswith("/idle.bin"))
    haul_tell, haul_rpc = script("haul-tellstatus", "aria2.tellStatus", [haul_gid]), f"{base}/jsonrpc"
    rows.append(["haul", "status", "idle", *fmt_wrk(wrk(status, seconds))])
    rows.append(["haul", f"list of {listed}", "idle", *fmt_wrk(wrk(listing, seconds))])
    rows.append(["haul aria2 RPC", "tellStatus", "idle", *fmt_wrk(wrk(haul_rpc, seconds, haul_tell))])
    # One connection each, as aria2's default (--max-connection-per-server=1): busy for the whole minute.
    busy = [haul.call("POST", "/downloads", {"url": f"{origin}/d{i}.bin", "filename": f"busy{i}.bin",
                                             "connections": 1})["id"] for i in range(4)]
    time.sleep(0.5)
    watch = EventWatch(haul.port, busy[0])
    watched = time.monotonic()
    rows.append(["haul", "status", "4 downloads", *fmt_wrk(wrk(status, seconds))])
    rows.append(["haul", f"list of {listed}", "4 downloads", *fmt_wrk(wrk(listing, seconds))])
    rows.append(["haul aria2 RPC", "tellStatus", "4 downloads", *fmt_wrk(wrk(haul_rpc, seconds, haul_tell))])
    events, gap = watch.stop()
    watched = time.monotonic() - watched
    haul.stop()
    aria, port = start_aria2_rpc(work + "/aria-d", "--file-allocation=none", "--allow-overwrite=true")

    def rpc(method, params):
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("POST", "/jsonrpc", body=json.dumps({"jsonrpc": "2.0", "id": "1", "method": method,
                                                          "params": params}),
                     headers={"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())["result"]
    gid = rpc("aria2.addUri", [[origin + "/d0.bin"], {"pause": "true", "out": "idle.bin"}])
    for i in range(listed - 1):
        rpc("aria2.addUri", [[origin + "/d0.bin"], {"pause": "true", "out": f"p{i}.bin"}])
    tell, waiting = script("tellstatus", "aria2.tellStatus", [gid]), script("tellwaiting", "aria2.tellWaiting",
                                                                             [0, listed])
    rpc_url = f"http://127.0.0.1:{port}/jsonrpc"
    rows.append(["aria2 RPC", "tellStatus", "idle", *fmt_wrk(wrk(rpc_url, seconds, tell))])
    rows.append(["aria2 RPC", f"tellWaiting 0 {listed}", "idle", *fmt_wrk(wrk(rpc_url, seconds, waiting))])
    for i in range(4):
        rpc("aria2.addUri", [[f"{origin}/d{i}.bin"], {"out": f"busy{i}.bin"}])
    time.sleep(0.5)
    rows.append(["aria2 RPC", "tellStatus", "4 downloads", *fmt_wrk(wrk(rpc_url, seconds, tell))])
    rows.append(["aria2 RPC", f"tellWaiting 0 {listed}", "4 downloads", *fmt_wrk(wrk(rpc_url, seconds, waiting))])
    # Time per request, so lower is better like every other ratio.

    def rate(row):
        return float(row[3].replace(",", ""))
    report.ratios.append(("D API busy vs aria2", rate(rows[8]) / rate(rows[3])))
    report.ratios.append(("D list busy vs aria2", rate(rows[9]) / rate(rows[4])))
    report.ratios.append(("D tellStatus busy vs aria2", rate(rows[8]) / rate(rows[5])))
    aria.terminate()
    aria.wait()
    nginx.terminate()
    report.section("D: API latency, wrk -t2 -c32 on one download's status and on a list",
                   f"Haul: GET /downloads/{{id}} and GET /downloads?limit={listed} ({listed} downloads stored), and "
                   "the same download by its aria2 front's aria2.tellStatus. "
                   f"aria2: POST aria2.tellStatus and aria2.tellWaiting(0, {listed}) (as many stored). Downloads "
                   f"throttled to 1 MiB/s, one connection each. Meanwhile an event-stream client following Haul's busy downloads got "
                   f"{events} progress events for one of them in {watched:.1f} s, the longest gap {gap * 1000:.0f} ms "
                   "(without the load: one a second, the engine's tick).")
    report.table(["server", "request", "while", "requests/s", "p50", "p99"], rows)


def fmt_wrk(result):
    rps, p50, p99 = result
    return [f"{rps:,.0f}", f"{p50:.2f} ms", f"{p99:.2f} ms"]


def post_config(path, url, bodies):
    """A curl config that POSTs each JSON body to `url` in turn: one curl process, one keep-alive connection, one
    request at a time, so both servers face the same client and the client's cost stays small and equal."""
    entries = []
    for body in bodies:
        quoted = json.dumps(body).replace("\\", "\\\\").replace('"', '\\"')
        entries.append(f'url = "{url}"\ndata = "{quoted}"\nheader = "Content-Type: application/json"\n'
                       'output = "/dev/null"\nfail\n')
    with open(path, "w") as f:
        # `next` separates requests; one after the last would start an empty one.
        f.write("next\n".join(entries))


def scenario_e(args, report, work, disk):
    count = 100 if args.quick else 10000
    haul = Haul(args.haul, work + "/haul-e")
    post_config(work + "/e-haul.cfg", f"http://127.0.0.1:{haul.port}/downloads",
                ({"url": f"http://127.0.0.1:9/queued/{i}.bin", "start_paused": True} for i in range(count)))
    haul_time, _, _ = timed(["curl", "-sS", "-K", work + "/e-haul.cfg"])
    held = haul.call("GET", "/stats")["downloads"]
    if held != count:
        raise RuntimeError(f"haul holds {held} downloads, not {count}")
    haul_rss = haul.peak_rss()
    haul.stop()
    rows = [["haul", f"{haul_time:.2f} s", f"{haul_rss / 1024:.1f} MiB"]]
    if shutil.which("aria2c"):
        aria, port = start_aria2_rpc(work + "/aria-e", "--max-concurrent-downloads=1")
        post_config(work + "/e-aria.cfg", f"http://127.0.0.1:{port}/jsonrpc",
                    ({"jsonrpc": "2.0", "id": str(i), "method": "aria2.addUri",
                      "params": [[f"http://127.0.0.1:9/queued/{i}.bin"], {"pause": "true"}]} for i in range(count)))
        aria_time, _, _ = timed(["curl", "-sS", "-K", work + "/e-aria.cfg"])
        aria_rss = proc_stat(aria.pid)[1]
        aria.terminate()
        aria.wait()
        rows.append(["aria2 RPC", f"{aria_time:.2f} s", f"{aria_rss / 1024:.1f} MiB"])
        report.ratios.append(("E adding vs aria2", haul_time / aria_time))
        report.ratios.append(("E RSS vs aria2", haul_rss / aria_rss))
    report.section(f"E: {count} paused downloads added one request at a time",
                   "One `curl -K` process sends the requests in turn over one keep-alive connection, the same client "
                   "for both servers. Peak RSS of the server.")
    report.table(["server", "time to add", "peak RSS"], rows)


def current_rss(pid):
    """Resident set (KiB) of a live process now, not its peak."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def latencies(port, paths):
    """p50 and p99 (ms) of GETs of `paths` in turn over one keep-alive connection; each must answer 200."""
    conn, times = http.client.HTTPConnection("127.0.0.1", port), []
    for path in paths:
        start = time.perf_counter()
        conn.request("GET", path)
        reply = conn.getresponse()
        reply.read()
        times.append((time.perf_counter() - start) * 1000)
        if reply.status != 200:
            raise RuntimeError(f"GET {path}: {reply.status}")
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def scenario_m(args, report, work, disk):
    count = 2000 if args.quick else args.stored
    batch = 1000
    root = work + "/haul-m"
    haul = Haul(args.haul, root, "--max-downloads", str(count))
    haul.call("PUT", "/categories/tv", {})
    # One download in ten in a category; every URL different (a list a person or a feed adds).
    bodies = [json.dumps({"downloads": [
        dict({"url": f"http://127.0.0.1:9/m/{b}/{i}.bin", "start_paused": True},
             **({"category": "tv"} if i % 10 == 0 else {})) for i in range(batch)]}).encode()
        for b in range(count // batch)]
    conn = http.client.HTTPConnection("127.0.0.1", haul.port)
    cpu0 = proc_stat(haul.proc.pid)[0]
    start = time.monotonic()
    for body in bodies:
        conn.request("POST", "/downloads", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        if reply.status != 200:
            raise RuntimeError(f"a batch answered {reply.status}")
    added = time.monotonic() - start
    add_cpu = proc_stat(haul.proc.pid)[0] - cpu0
    del bodies
    held = haul.call("GET", "/stats")["downloads"]
    if held != count:
        raise RuntimeError(f"haul holds {held} downloads, not {count}")
    rss_added = current_rss(haul.proc.pid)
    haul.stop()
    # Start-up: from the process's start to its first answer with every download known.
    start = time.monotonic()
    haul = Haul(args.haul, root, "--max-downloads", str(count))
    stats = haul.call("GET", "/stats")
    startup = time.monotonic() - start
    if stats["downloads"] != count:
        raise RuntimeError(f"after a restart haul holds {stats['downloads']} downloads, not {count}")
    rss_started = current_rss(haul.proc.pid)
    rng = random.Random(7)
    ids = [d["id"] for d in haul.call("GET", f"/downloads?limit=1000&cursor={rng.randrange(count - 1000)}")["downloads"]]
    n = 50 if args.quick else 300
    cursors = [rng.randrange(count) for _ in range(n)]
    rows = []
    for label, query in (("status", None), ("page of 100", ""), ("page of 100, state=paused", "&state=paused"),
                         ("page of 100, category=tv", "&category=tv"), ("page of 100, q=/7/", "&q=/7/"),
                         ("page of 100, id_prefix", None)):
        if label == "status":
            paths = [f"/downloads/{ids[i % len(ids)]}" for i in range(n)]
        elif label.endswith("id_prefix"):
            paths = [f"/downloads?limit=100&id_prefix={ids[i % len(ids)][:3]}" for i in range(n)]
        else:
            paths = [f"/downloads?limit=100&cursor={c}{query}" for c in cursors]
        if label.endswith(("q=/7/", "id_prefix")):
            # Filters no index serves walk the list: fewer of them, or a million takes an hour.
            paths = paths[:30]
        p50, p99 = latencies(haul.port, paths)
        rows.append([label, f"{p50:.2f} ms", f"{p99:.2f} ms"])
    rss_read = current_rss(haul.proc.pid)
    haul.stop()
    report.section(f"M: {count:,} stored downloads",
                   f"Added paused by batch ({batch:,} a POST, one connection, one in ten in a category, every URL "
                   f"different): {added:.1f} s ({count / added:,.0f} a second, server CPU {add_cpu:.1f} s), RSS "
                   f"{rss_added / 1024:.1f} MiB after. Restarted: {startup:.2f} s from the process's start to its "
                   f"first answer, RSS {rss_started / 1024:.1f} MiB, {rss_read / 1024:.1f} MiB after the reads below. "
                   f"Reads: {n} GETs each (30 for the search and the id prefix), in turn over one connection, at "
                   "random places in the list (client-side latency, Python's client included).")
    report.table(["read", "p50", "p99"], rows)


def scenario_f(args, report, work, disk):
    clients_count = 50 if args.quick else 10000
    size = (2 if args.quick else 16) * MIB
    src = work + "/www/sse.bin"
    make_file(src, size)
    nginx, origin = start_nginx(work + "/www", work + "/nginx-f", "limit_rate 4m;")
    haul = Haul(args.haul, work + "/haul-f", "--max-connections-per-client", str(2 * clients_count),
                "--max-event-streams", str(2 * clients_count))
    socks = []
    for _ in range(clients_count):
        s = socket.create_connection(("127.0.0.1", haul.port))
        s.sendall(b"GET /events HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        s.setblocking(False)
        socks.append(s)
    while haul.call("GET", "/stats")["event_streams"] < clients_count:
        time.sleep(0.01)
    cpu0, _ = proc_stat(haul.proc.pid)
    start = time.monotonic()
    d = haul.call("POST", "/downloads", {"url": origin + "/sse.bin", "filename": "sse.bin"})
    # epoll, not select(): select cannot watch descriptors past 1,023.
    poller = selectors.DefaultSelector()
    for s in socks:
        poller.register(s, selectors.EVENT_READ)
    done = closed = 0
    buffers = {}
    while done + closed < clients_count and time.monotonic() - start < 300:
        for key, _ in poller.select(0.1):
            s = key.fileobj
            try:
                data = s.recv(1 << 16)
            except BlockingIOError:
                continue
            buffers[s] = (buffers.get(s, b"") + data)[-4096:]
            if not data:
                # The server closed this stream before the completion reached it.
                poller.unregister(s)
                closed += 1
            elif b'"state":"completed"' in buffers[s] and d["id"].encode() in buffers[s]:
                poller.unregister(s)
                done += 1
    wall = time.monotonic() - start
    cpu = proc_stat(haul.proc.pid)[0] - cpu0
    rss = haul.peak_rss()
    for s in socks:
        s.close()
    haul.stop()
    nginx.terminate()
    if done < clients_count:
        raise RuntimeError(f"only {done} of {clients_count} clients saw the completion ({closed} closed early)")
    report.section(f"F: {clients_count} event-stream clients following one {size // MIB} MiB download",
                   "Every client saw the completion event. Peak RSS of the whole run, the connections' set-up included.")
    report.table(["peak RSS", "server CPU", "wall", "CPU share"],
                 [[f"{rss / 1024:.1f} MiB", f"{cpu:.2f} s", f"{wall:.2f} s", f"{100 * cpu / wall:.0f}%"]])


def scenario_h(args, report, work, disk):
    count = 300 if args.quick else 100000
    paused = count // 10
    www = work + "/www-h"
    os.makedirs(www)
    os.chmod(www, 0o755)
    make_file(www + "/tiny.bin", 1024)
    nginx, origin = start_nginx(www, work + "/nginx-h")
    flags = ("--max-downloads", str(2 * count), "--max-active", "16")
    haul = Haul(args.haul, work + "/haul-h", *flags)
    # Nine in ten are downloaded for real (1 KiB each), the rest stay paused: the store a long-running server holds.
    post_config(work + "/h.cfg", f"http://127.0.0.1:{haul.port}/downloads",
                ({"url": f"{origin}/tiny.bin", "filename": f"f{i:06d}.bin", "start_paused": i % 10 == 0}
                 for i in range(count)))
    fill_time, _, _ = timed(["curl", "-sS", "-K", work + "/h.cfg"])
    haul.wait_all(count - paused, poll=0.2)
    haul.stop()
    nginx.terminate()
    # Start-up: from exec to the listening line, then to the first answer.
    start = time.monotonic()
    haul = Haul(args.haul, work + "/haul-h", *flags)
    listening = time.monotonic() - start
    stats = haul.call("GET", "/stats")
    first_answer = time.monotonic() - start
    if stats["downloads"] != count or stats["completed"] != count - paused:
        raise RuntimeError(f"haul holds {stats['downloads']} downloads, {stats['completed']} completed")
    base = f"http://127.0.0.1:{haul.port}"
    skip = min(count // 10, 1000)
    first = haul.call("GET", f"/downloads?limit={skip}")
    middle, cursor = first["downloads"][-1]["id"], first["next_cursor"]
    sequence = stats["sequence"]
    seconds = 1 if args.quick else 5
    rows = []
    for label, path in (("first page (100)", "/downloads?limit=100"),
                        (f"page after {skip:,}", f"/downloads?limit=100&cursor={cursor}"),
                        ("paused only", "/downloads?limit=100&state=paused"),
                        ("changed_since", f"/downloads?changed_since={sequence}"),
                        ("one download", f"/downloads/{middle}"),
                        ("/stats", "/stats")):
        # --quick checks each request once, with one client.
        busy = ["-"] * 3 if args.quick else fmt_wrk(wrk(base + path, seconds))
        rows.append([label, *fmt_wrk(wrk(base + path, seconds, clients=1)), *busy])
    rss = haul.peak_rss()
    haul.stop()
    report.section(f"H: {count:,} stored downloads ({count - paused:,} completed, {paused:,} paused)",
                   f"Filled by one `curl -K` of POSTs in {fill_time:.1f} s (downloads running meanwhile). After a "
                   f"restart: listening after {listening * 1000:.0f} ms, first answer after {first_answer * 1000:.0f} "
                   f"ms; peak RSS {rss / 1024:.1f} MiB through the wrk runs below: one client (-c1), then 32 "
                   "(-t2 -c32).")
    report.table(["request", "1 client: req/s", "p50", "p99", "32 clients: req/s", "p50", "p99"], rows)


def draw_chart(ratios, path):
    """A bar chart of Haul / anchor with gnuplot; False when gnuplot is missing."""
    if not shutil.which("gnuplot"):
        print("gnuplot not found: no chart")
        return False
    data = path + ".dat"
    with open(data, "w") as f:
        for label, value in ratios:
            f.write(f'"{label}" {value:.3f}\n')
    script = f"""set terminal png size 900,450
set output "{path}"
set style data histograms
set style fill solid 0.8
set boxwidth 0.7
set yrange [0:*]
set ylabel "Haul / anchor (lower is better)"
set xtics rotate by -30 font ",9"
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2
plot "{data}" using 2:xtic(1) title "" lc rgb "#3a7bd5"
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(data)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--haul", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scenarios", default="A,B,C,D,E,F,G,H,I,J,K,P,T,V,W")
    ap.add_argument("--list-counts", default=None, help="scenario K's list lengths (default 1000,10000,100000)")
    ap.add_argument("--list-places", default="tmpfs,disk", help="where scenario K writes: tmpfs, disk or both")
    ap.add_argument("--stored", type=int, default=1_000_000, help="scenario M's stored downloads")
    ap.add_argument("--quick", action="store_true", help="tiny inputs: checks the harness, not speed")
    ap.add_argument("--out", default=None, help="Markdown report (default bench/results/latest.md; none if --quick)")
    args = ap.parse_args()
    if args.quick and "M" not in args.scenarios.split(","):
        # M is left out of the full run (minutes and gigabytes), not out of the check that every scenario works.
        args.scenarios += ",M"
    # Scenario F holds 10,000 sockets open.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    # SIGTERM (a CI job cancelled, make interrupted) ends the run as Ctrl-C does: through the clean-up below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="haul-bench-", dir="/dev/shm")
    disk = tempfile.mkdtemp(prefix="haul-bench-", dir=disk_directory())
    for d in (work, disk):
        os.chmod(d, 0o755)
    os.makedirs(work + "/www")
    os.chmod(work + "/www", 0o755)
    report = Report()
    report.lines = [f"# Haul benchmarks, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", "",
                    f"{os.cpu_count()} cores; loopback; `bench/bench.py --scenarios {args.scenarios}"
                    + (" --quick" if args.quick else "") + "`"]
    scenarios = {"A": scenario_a, "B": scenario_b, "C": scenario_c, "D": scenario_d, "E": scenario_e,
                 "F": scenario_f, "G": scenario_g, "H": scenario_h, "I": scenario_i, "J": scenario_j,
                 "K": scenario_k, "M": scenario_m, "P": scenario_p, "T": scenario_t, "V": scenario_v,
                 "W": scenario_w}
    try:
        for key in args.scenarios.split(","):
            try:
                scenarios[key.strip()](args, report, work, disk)
            except AnchorFailed as missing:
                report.section(f"{key.strip()}: not compared",
                               f"`{missing.args[0]}`, the tool this scenario compares Haul with, failed.")
        if CONTENDER_FAILURES:
            report.section("Other tools that failed",
                           "Each is its row's result, left out of its table; Haul's own failures fail the run.")
            report.lines += [f"- {failure}" for failure in CONTENDER_FAILURES]
            print("\n".join(f"  {failure}" for failure in CONTENDER_FAILURES))
    finally:
        stop_everything()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    out = args.out or (None if args.quick else "bench/results/latest.md")
    if out:
        chart = os.path.splitext(out)[0] + ".png"
        if report.ratios and draw_chart(report.ratios, chart):
            report.lines += ["", "## Headline ratios", "",
                             "Haul divided by the anchor; below 1 Haul is faster or lighter.", "",
                             f"![Haul / anchor]({os.path.basename(chart)})", ""]
            report.lines += [f"- {label}: {value:.2f}" for label, value in report.ratios]
        with open(out, "w") as f:
            f.write("\n".join(report.lines) + "\n")
        print(f"\nreport: {out}")
    if args.quick:
        print("bench: 1 passed, 0 failed")


if __name__ == "__main__":
    sys.exit(main())
