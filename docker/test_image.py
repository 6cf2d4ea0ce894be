#!/usr/bin/env python3
"""make docker-test: docker/Dockerfile built, and its image run and checked as a user runs it, with no Docker engine.

buildah builds the Dockerfile itself, from base images made here (docker/base-images.sh: Debian slim from its
packages, and that plus this machine's Swift toolchain as the builder) named by the build arguments the Dockerfile
declares. A container is the image's own command (ENTRYPOINT + CMD, its USER and ENV) run by
`buildah run --isolation chroot` (podman run cannot start containers on these machines) in a network namespace of
its own, joined to the host by a veth pair: the host reaches the container's port at the container's address, as
`docker run -p` publishes it, and the container reaches an origin on the host's end of the pair, as a container
reaches its bridge's gateway. The `docker build` and `docker run` lines are README's, parsed: their flags are what
the test gives buildah, so the README says what is tested.
"""
import hashlib, http.client, json, os, re, secrets, shlex, shutil, signal, socket, ssl, subprocess, sys, tempfile
import time, urllib.error, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "localhost/haul:test"
SLIM = "localhost/haul-base/debian:bookworm-slim"
BUILDER = "localhost/haul-base/swift:bookworm"
MIB = 1 << 20
CHECKS = []


def check(condition, what, detail=""):
    """Records one check a user would notice; a failed one ends the test."""
    if not condition:
        raise AssertionError(f"{what}{': ' + detail if detail else ''}")
    CHECKS.append(what)
    print(f"  ok  {what}", flush=True)


def note(what):
    """Records a step whose check came before it (a wait that would have timed out), with what it measured."""
    CHECKS.append(what)
    print(f"  ok  {what}", flush=True)


def run(args, check_status=True, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if check_status and result.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def wait_until(what, predicate, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# README: the container section's commands.

def readme_commands():
    """The `docker build` and `docker run` command lines of README's container section, continuation lines joined."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text.split("\n## In a container\n", 1)[1].split("\n## ", 1)[0]
    commands = {}
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            words = shlex.split(line.split(" #", 1)[0]) if not line.lstrip().startswith("#") else []
            if words[:2] in (["docker", "build"], ["docker", "run"]) and words[1] not in commands:
                commands[words[1]] = words[2:]
    return commands["build"], commands["run"]


def parse_build(words):
    options, context = {}, None
    i = 0
    while i < len(words):
        if words[i] in ("-f", "-t"):
            options[words[i]] = words[i + 1]
            i += 2
        elif words[i].startswith("-"):
            raise AssertionError(f"README's docker build has {words[i]}, which this test does not know")
        else:
            context = words[i]
            i += 1
    return options.get("-f"), options.get("-t"), context


def parse_run(words):
    """-e, -p, -v and --user of README's docker run, and the image; any other option fails the test."""
    spec = {"env": [], "ports": [], "volumes": [], "user": None}
    i = 0
    while i < len(words) and words[i].startswith("-"):
        flag = words[i]
        if flag in ("-d", "--detach", "--rm"):
            i += 1
            continue
        value = words[i + 1]
        if flag in ("-e", "--env"):
            spec["env"].append(value)
        elif flag in ("-p", "--publish"):
            spec["ports"].append(value)
        elif flag in ("-v", "--volume"):
            spec["volumes"].append(value)
        elif flag in ("-u", "--user"):
            spec["user"] = value
        elif flag not in ("--name", "--restart"):
            raise AssertionError(f"README's docker run has {flag}, which this test does not know")
        i += 2
    spec["image"], spec["command"] = words[i], words[i + 1:]
    return spec


# The network: one namespace per container, a veth pair to the host.

class Network:
    def __init__(self, name, index):
        self.name = name
        taken = run(["ip", "-o", "-4", "addr"]).stdout + run(["ip", "-4", "route"]).stdout
        third = next(t for t in range(100 + (os.getpid() + index) % 150, 256) if f"10.213.{t}." not in taken)
        self.host_ip, self.ip = f"10.213.{third}.1", f"10.213.{third}.2"
        self.host_link, peer = f"hd{os.getpid() % 10000}h{index}", f"hd{os.getpid() % 10000}c{index}"
        run(["ip", "netns", "add", name])
        run(["ip", "link", "add", self.host_link, "type", "veth", "peer", "name", peer])
        run(["ip", "link", "set", peer, "netns", name])
        run(["ip", "addr", "add", self.host_ip + "/30", "dev", self.host_link])
        run(["ip", "link", "set", self.host_link, "up"])
        for command in (["ip", "addr", "add", self.ip + "/30", "dev", peer], ["ip", "link", "set", peer, "up"],
                        ["ip", "link", "set", "lo", "up"]):
            run(["ip", "netns", "exec", name] + command)

    def close(self):
        pids = run(["ip", "netns", "pids", self.name], check_status=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        run(["ip", "link", "del", self.host_link], check_status=False)
        run(["ip", "netns", "del", self.name], check_status=False)
        shutil.rmtree(f"/etc/netns/{self.name}", ignore_errors=True)


# A container: a buildah working container of the image, its process run in a network namespace.

class Container:
    def __init__(self, name, network, volumes, log):
        self.name = run(["buildah", "from", "--name", name, IMAGE]).stdout.strip()
        self.network, self.volumes, self.log = network, volumes, log
        # As `docker run -v` does, a mount replaces the image's anonymous volume at its path: buildah 1.28 would
        # otherwise mount its own volume over some of them (which one depends on the order of the -v options).
        for _, target in volumes:
            run(["buildah", "config", "--volume", target + "-", self.name])
        config = image_config()["Config"]
        self.command = config["Entrypoint"] + config["Cmd"]
        self.process = None
        self.env = {}

    def _run_args(self, env, user):
        args = ["ip", "netns", "exec", self.network.name, "buildah", "run", "--isolation", "chroot"]
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        if user:
            args += ["--user", user]
        for source, target in self.volumes:
            args += ["--volume", f"{source}:{target}"]
        return args + [self.name, "--"]

    def start(self, env, user=None):
        """`docker start`: the image's command with `env` on top of the image's, as `user` (else the image's)."""
        self.env, self.user = env, user
        out = open(self.log, "a")
        self.process = subprocess.Popen(self._run_args(env, user) + self.command, stdout=out, stderr=out,
                                        start_new_session=True)
        self.started = time.monotonic()

    def exec(self, command, timeout=30):
        """`docker exec`: another process in the container, with the container's environment and user. While the
        server runs, it joins the server's root and network namespace (a second `buildah run` of one container at
        the same time makes the first one's clean-up fail); otherwise a `buildah run` of its own."""
        if self.process is None or self.process.poll() is not None:
            return run(self._run_args(self.env, self.user) + command, check_status=False, timeout=timeout)
        pid = self.server_pid()
        config = image_config()["Config"]
        env = dict(item.split("=", 1) for item in config.get("Env", []))
        env.update(self.env)
        uid, gid = (self.user or config["User"]).split(":")
        return run(["nsenter", f"--net=/run/netns/{self.network.name}", f"--root=/proc/{pid}/root", "--wd=/",
                    f"--setgid={gid}", f"--setuid={uid}", "--"] + command, check_status=False, timeout=timeout,
                   env=env)

    def server_pid(self):
        """The pid of the image's command (buildah run's descendant running /usr/local/bin/haul)."""
        def find():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                    if argv[0] != b"/usr/local/bin/haul" or argv[1:2] != [b"serve"]:
                        continue
                    ancestor = int(pid)
                    while ancestor > 1:
                        if ancestor == self.process.pid:
                            return int(pid)
                        stat = open(f"/proc/{ancestor}/stat").read().rsplit(")", 1)[1].split()
                        ancestor = int(stat[1])
                except (OSError, IndexError, ValueError):
                    continue
            return None
        return wait_until("the server's process", find, timeout=15)

    def wait_exit(self, timeout):
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        """`docker stop`: SIGTERM to the container's process; the seconds until it exited, and its status."""
        pid = self.server_pid()
        start = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        status = self.wait_exit(30)
        return time.monotonic() - start, status

    def kill(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def remove(self):
        self.kill()
        run(["buildah", "rm", self.name], check_status=False)


# HTTP to the container's published port.

class API:
    def __init__(self, base, token=None):
        self.base, self.token = base, token

    def call(self, method, path, body=None, token=True, headers=None):
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if token and self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                data = reply.read()
                return reply.status, json.loads(data) if data else None
        except urllib.error.HTTPError as error:
            data = error.read()
            try:
                return error.code, json.loads(data)
            except ValueError:
                return error.code, data

    def healthy(self):
        try:
            return self.call("GET", "/healthz", token=False)[0] == 200
        except OSError:
            return False

    def download(self, id):
        status, body = self.call("GET", "/downloads/" + id)
        return body if status == 200 else None

    def wait_state(self, id, state, timeout=60):
        def reached():
            d = self.download(id)
            if d and d["state"] == "failed" and state != "failed":
                raise AssertionError(f"download {id} failed: {d['error']}")
            return d if d and d["state"] == state else None
        return wait_until(f"download {id} to be {state}", reached, timeout=timeout)


def image_config():
    return json.loads(run(["podman", "image", "inspect", IMAGE]).stdout)[0]


def start_origin(work, host_ip):
    """nginx on the host's end of the link, serving `www`; /slow/ at 512 KiB/s per connection. Logs each request's
    path, Range and the bytes sent, so the test can tell a resumed download from one started over."""
    prefix = os.path.join(work, "origin")
    os.makedirs(prefix + "/logs")
    with socket.socket() as s:
        s.bind((host_ip, 0))
        port = s.getsockname()[1]
    with open(prefix + "/nginx.conf", "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/logs/error.log;
events {{ worker_connections 256; }}
http {{
  log_format ranges '$uri\\t$status\\t$http_range\\t$body_bytes_sent';
  access_log {prefix}/logs/access.log ranges;
  client_body_temp_path {prefix}/b; proxy_temp_path {prefix}/p; fastcgi_temp_path {prefix}/f;
  uwsgi_temp_path {prefix}/u; scgi_temp_path {prefix}/s;
  server {{ listen {host_ip}:{port}; root {work}/www; location /slow/ {{ limit_rate 512k; }} }}
}}
""")
    process = subprocess.Popen(["nginx", "-p", prefix, "-c", prefix + "/nginx.conf"], stderr=subprocess.DEVNULL)

    def accepting():
        try:
            socket.create_connection((host_ip, port), timeout=0.2).close()
            return True
        except OSError:
            return False
    wait_until("the origin", accepting, timeout=10)
    return process, f"http://{host_ip}:{port}", prefix + "/logs/access.log"


def stop_nginx(process):
    """Stops an nginx run in the foreground: SIGTERM has its master stop its worker too (a SIGKILL of the master left
    the worker running after every run, an orphan of init)."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def random_file(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    os.chmod(path, 0o644)
    return sha256(path)


def docker_build_args(dockerfile_path):
    """The build arguments the Dockerfile declares before its first FROM, with their defaults."""
    declared = {}
    for line in open(dockerfile_path):
        if line.startswith("FROM "):
            break
        match = re.match(r"ARG (\w+)=(\S+)", line)
        if match:
            declared[match.group(1)] = match.group(2)
    return declared


def openapi_version():
    text = open(os.path.join(ROOT, "openapi.yaml")).read()
    return re.search(r"^info:\n(?:  .*\n)*?  version: (\S+)", text, re.M).group(1)


# The checks, in the order a user meets them.

def build(work):
    print("docker-test: base images", flush=True)
    subprocess.run([os.path.join(ROOT, "docker/base-images.sh")], check=True)
    build_words, run_words = readme_commands()
    dockerfile, tag, context = parse_build(build_words)
    check(dockerfile == "docker/Dockerfile" and context == ".", "README builds docker/Dockerfile from the top folder",
          shlex.join(build_words))
    declared = docker_build_args(os.path.join(ROOT, dockerfile))
    check(declared.get("SWIFT_IMAGE") == "swift:6.3-bookworm" and declared.get("RUNTIME_IMAGE") == "debian:bookworm-slim",
          "the base images are build arguments with today's defaults", str(declared))
    revision = run(["git", "rev-parse", "HEAD"], cwd=ROOT).stdout.strip()
    source = run(["git", "remote", "get-url", "origin"], cwd=ROOT, check_status=False).stdout.strip() or ROOT
    print(f"docker-test: buildah bud -f {dockerfile} (SWIFT_IMAGE={BUILDER}, RUNTIME_IMAGE={SLIM})", flush=True)
    started = time.monotonic()
    with open(os.path.join(work, "build.log"), "w") as log:
        status = subprocess.run(["buildah", "bud", "--isolation", "chroot", "--format", "docker", "--layers=false",
                                 "--build-arg", f"SWIFT_IMAGE={BUILDER}", "--build-arg", f"RUNTIME_IMAGE={SLIM}",
                                 "--build-arg", f"HAUL_REVISION={revision}", "--build-arg", f"HAUL_SOURCE={source}",
                                 "-f", dockerfile, "-t", IMAGE, context], cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT).returncode
    if status != 0:
        print(open(os.path.join(work, "build.log")).read()[-6000:], file=sys.stderr)
        raise AssertionError(f"buildah bud failed with status {status}")
    build_seconds = time.monotonic() - started
    note(f"docker/Dockerfile builds ({build_seconds:.0f} s)")
    return parse_run(run_words), tag, revision, source


def inspect(revision, source):
    image = image_config()
    config = image["Config"]
    check(config.get("User") == "10001:10001", "the image runs as uid 10001", config.get("User"))
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    check(set(env) == {"PATH", "HAUL_LISTEN", "HAUL_DOWNLOAD_DIR", "HAUL_DATA_DIR"},
          "the image's environment is HAUL_LISTEN, HAUL_DOWNLOAD_DIR, HAUL_DATA_DIR (no HAUL_SERVER to pin a port)",
          str(env))
    check(image.get("Healthcheck", {}).get("Test") == ["CMD", "haul", "health"], "HEALTHCHECK is `haul health`",
          str(image.get("Healthcheck")))
    check(set(config.get("Volumes", {})) == {"/downloads", "/var/lib/haul"} and "8080/tcp" in config.get("ExposedPorts", {}),
          "volumes /downloads and /var/lib/haul, port 8080")
    labels = config.get("Labels", {})
    licence = open(os.path.join(ROOT, "LICENSE")).readline().strip()
    check(labels.get("org.opencontainers.image.licenses") == "MIT" and licence == "MIT License",
          "OCI label licenses=MIT, as LICENSE says")
    check(labels.get("org.opencontainers.image.version") == openapi_version(),
          f"OCI label version={labels.get('org.opencontainers.image.version')}, openapi.yaml's version")
    check(labels.get("org.opencontainers.image.revision") == revision and
          labels.get("org.opencontainers.image.source") == source, "OCI labels revision and source", str(labels))
    return image


def no_toolchain(image, work):
    name = run(["buildah", "from", "--name", f"haul-dt-inspect-{os.getpid()}", IMAGE]).stdout.strip()
    try:
        root = run(["buildah", "mount", name]).stdout.strip()
        found = []
        for directory, dirs, files in os.walk(root):
            relative = directory[len(root):] or "/"
            if relative.startswith(("/proc", "/sys", "/dev")):
                continue
            for entry in files:
                if (re.fullmatch(r"swift[\w-]*|swiftc|clang(\+\+|-\d+)?|gcc(-\d+)?|cc1|ld(\.lld|\.gold)?|lldb|"
                                 r"lib_FoundationICU\.\w+|libswiftCore\.\w+|stdio\.h", entry)
                        or entry.endswith(".swiftmodule")):
                    found.append(os.path.join(relative, entry))
            for entry in dirs:
                # The Swift runtime's, GCC's start files and libraries, C headers (base-files makes /usr/include).
                if (os.path.join(relative, entry) in ("/usr/lib/swift", "/usr/lib/swift_static", "/usr/lib/gcc",
                                                      "/usr/include") and os.listdir(os.path.join(directory, entry))):
                    found.append(os.path.join(relative, entry))
        check(not found, "the image holds no toolchain (no swift, clang, gcc, ld, Swift modules or C headers)",
              ", ".join(found[:10]))
        binary = os.path.getsize(os.path.join(root, "usr/local/bin/haul"))
        mode = os.stat(os.path.join(root, "downloads"))
        data = os.stat(os.path.join(root, "var/lib/haul"))
        ldd = run(["buildah", "run", "--isolation", "chroot", name, "--", "ldd", "/usr/local/bin/haul"]).stdout
        check("not found" not in ldd, "every library the binary links is in the image (ldd inside it)", ldd)
        return binary, {"/downloads": (mode.st_uid, mode.st_gid, mode.st_mode & 0o7777),
                        "/var/lib/haul": (data.st_uid, data.st_gid, data.st_mode & 0o7777)}
    finally:
        run(["buildah", "umount", name], check_status=False)
        run(["buildah", "rm", name], check_status=False)


def named_volumes(spec, work, image_dirs):
    """README's -v NAME:PATH as host folders made as a fresh named volume is: owner and mode of the image's PATH."""
    volumes = []
    for text in spec["volumes"]:
        source, target = text.split(":")[:2]
        check(not source.startswith("/"), f"README's volume {source} is a named volume")
        host = os.path.join(work, "volumes", source)
        os.makedirs(host)
        uid, gid, mode = image_dirs[target]
        os.chown(host, uid, gid)
        os.chmod(host, mode)
        volumes.append((host, target))
    return volumes


def main():
    if os.geteuid() != 0:
        sys.exit("docker-test: needs root (buildah, network namespaces); run it as root or in CI")
    work = tempfile.mkdtemp(prefix="haul-docker-test-")
    os.chmod(work, 0o755)
    cleanup = []
    try:
        spec, tag, revision, source = build(work)
        check(spec["image"] == tag.split(":")[0] and not spec["command"], "README runs the image it builds",
              f"{spec['image']} vs {tag}")
        image = inspect(revision, source)
        binary_size, image_dirs = no_toolchain(image, work)
        token = secrets.token_hex(24)
        env = {}
        for item in spec["env"]:
            name, _, value = item.partition("=")
            env[name] = value if value else {"HAUL_TOKEN": token}[name]
        check(set(env) == {"HAUL_TOKEN"}, "README's docker run gives only HAUL_TOKEN", str(env))
        published = [p.rsplit(":", 1)[1] for p in spec["ports"]]
        check(published == ["8080"], f"README publishes the container's port 8080 ({', '.join(spec['ports'])})")
        volumes = named_volumes(spec, work, image_dirs)

        network = Network(f"haul-dt-{os.getpid()}", 0)
        cleanup.append(network.close)
        origin, origin_url, origin_log = start_origin(work, network.host_ip)
        cleanup.append(lambda: stop_nginx(origin))
        small_hash = random_file(os.path.join(work, "www/file.bin"), 24 * MIB)
        slow_size = 32 * MIB
        slow_hash = random_file(os.path.join(work, "www/slow/slow.bin"), slow_size)
        api = API(f"http://{network.ip}:8080", token)

        # Without the token it must not start: the image listens beyond loopback.
        bare = Container(f"haul-dt-bare-{os.getpid()}", network, volumes, os.path.join(work, "bare.log"))
        cleanup.append(bare.remove)
        bare.start({})
        status = bare.wait_exit(15)
        output = open(bare.log).read()
        check(status == 2 and "refusing to listen on 0.0.0.0 without a token" in output and "HAUL_TOKEN" in output,
              "without HAUL_TOKEN the server refuses to start, and says why", f"status {status}: {output[-400:]}")
        bare.remove()

        # README's docker run.
        haul = Container(f"haul-dt-{os.getpid()}", network, volumes, os.path.join(work, "haul.log"))
        cleanup.append(haul.remove)
        haul.start(env)
        wait_until("/healthz on the published port", api.healthy, timeout=30)
        note(f"/healthz answers on {network.ip}:8080 ({time.monotonic() - haul.started:.2f} s after start)")
        pid = haul.server_pid()
        ids = {line.split(":")[0]: line.split()[1:] for line in open(f"/proc/{pid}/status")
               if line.startswith(("Uid:", "Gid:"))}
        check(set(ids["Uid"]) == {"10001"} and set(ids["Gid"]) == {"10001"}, "the server runs as uid 10001 gid 10001",
              str(ids))
        database = os.path.join(dict((target, host) for host, target in volumes)["/var/lib/haul"], "haul.sqlite")
        check(os.path.exists(database) and os.stat(database).st_mode & 0o777 == 0o600,
              "the database is in the /var/lib/haul volume, mode 0600")
        environ = dict(item.split("=", 1) for item in open(f"/proc/{pid}/environ", "rb").read().decode().split("\0")
                       if "=" in item)
        haul_vars = {k: v for k, v in environ.items() if k.startswith("HAUL_")}
        check(haul_vars == {"HAUL_LISTEN": "0.0.0.0:8080", "HAUL_DOWNLOAD_DIR": "/downloads",
                            "HAUL_DATA_DIR": "/var/lib/haul", "HAUL_TOKEN": token},
              "its HAUL_ environment is the image's and README's only", str(sorted(haul_vars)))
        check(api.call("GET", "/downloads", token=False)[0] == 401 and api.call("GET", "/downloads")[0] == 200,
              "the API needs the token")
        health = haul.exec(image["Healthcheck"]["Test"][1:])
        check(health.returncode == 0 and health.stdout == "ok\n", "the HEALTHCHECK command passes",
              health.stdout + health.stderr)

        status, small = api.call("POST", "/downloads", {"url": origin_url + "/file.bin"})
        check(status == 201, "POST /downloads of a file on the host", str(small))
        api.wait_state(small["id"], "completed")
        landed = os.path.join(volumes[0][0], "file.bin")
        check(sha256(landed) == small_hash and os.stat(landed).st_uid == 10001,
              "the file lands in the /downloads volume, sha256 intact, owned by uid 10001")

        status, slow = api.call("POST", "/downloads", {"url": origin_url + "/slow/slow.bin"})
        check(status == 201, "POST a second, throttled download")
        wait_until("the throttled download to be under way",
                   lambda: (api.download(slow["id"]) or {}).get("received_bytes", 0) >= 3 * MIB)
        seconds, status = haul.stop()
        check(status == 0 and seconds < 5,
              f"SIGTERM stops it in {seconds:.2f} s (under 5) with a download running, exit status 0", str(status))
        check(haul.exec(image["Healthcheck"]["Test"][1:]).returncode != 0, "the HEALTHCHECK fails while it is down")
        during = sum(int(line.split("\t")[3]) for line in open(origin_log) if line.startswith("/slow/"))

        # docker restart: the same container, the same volumes.
        haul.start(env)
        wait_until("/healthz after the restart", api.healthy, timeout=30)
        status, listing = api.call("GET", "/downloads")
        check(status == 200 and {d["id"] for d in listing["downloads"]} == {small["id"], slow["id"]},
              "after a restart both downloads are still there")
        check(api.download(small["id"])["state"] == "completed" and sha256(landed) == small_hash,
              "the finished one is still finished, its file intact")
        api.wait_state(slow["id"], "completed", timeout=90)
        slow_file = os.path.join(volumes[0][0], "slow.bin")
        sent = sum(int(line.split("\t")[3]) for line in open(origin_log) if line.startswith("/slow/"))
        check(sha256(slow_file) == slow_hash, "the interrupted one resumes and completes, sha256 intact")
        check(sent <= slow_size * 1.1,
              f"it resumed rather than started over: the origin sent {sent / MIB:.1f} MiB for a {slow_size // MIB} MiB "
              f"file ({during / MIB:.1f} MiB before the stop)")
        haul.stop()
        haul.remove()
        cleanup.remove(haul.remove)

        # A new container on the same volumes, listening elsewhere: the HEALTHCHECK follows HAUL_LISTEN.
        moved = Container(f"haul-dt-moved-{os.getpid()}", network, volumes, os.path.join(work, "moved.log"))
        cleanup.append(moved.remove)
        moved.start(dict(env, HAUL_LISTEN="0.0.0.0:9090"))
        moved_api = API(f"http://{network.ip}:9090", token)
        wait_until("/healthz on port 9090", moved_api.healthy, timeout=30)
        status, listing = moved_api.call("GET", "/downloads")
        check(status == 200 and len(listing["downloads"]) == 2, "a new container on the same volumes has both downloads")
        health = moved.exec(image["Healthcheck"]["Test"][1:])
        check(health.returncode == 0, "with HAUL_LISTEN=0.0.0.0:9090 the HEALTHCHECK follows the port",
              health.stdout + health.stderr)
        moved.stop()
        moved.remove()
        cleanup.remove(moved.remove)

        # Another user: named where the volume is not theirs; working on a bind mount that is.
        stranger = Container(f"haul-dt-user-{os.getpid()}", network, volumes, os.path.join(work, "user.log"))
        cleanup.append(stranger.remove)
        stranger.start(env, user="12345:12345")
        status = stranger.wait_exit(15)
        output = open(stranger.log).read()
        check(status == 1 and "cannot write to /downloads, the download directory (--download-dir, HAUL_DOWNLOAD_DIR): "
              "permission denied; it belongs to uid 10001 gid 10001 and Haul runs as uid 12345 gid 12345" in output
              and "docker run --user 10001:10001" in output,
              "--user 12345:12345 on volumes of uid 10001: the start-up error names the path, owner and fix",
              f"status {status}: {output[-600:]}")
        stranger.remove()
        binds = []
        for target in ("/downloads", "/var/lib/haul"):
            host = os.path.join(work, "bind" + target.replace("/", "-"))
            os.makedirs(host)
            os.chown(host, 1000, 1000)
            binds.append((host, target))
        owner = Container(f"haul-dt-owner-{os.getpid()}", network, binds, os.path.join(work, "owner.log"))
        cleanup.append(owner.remove)
        owner.start(env, user="1000:1000")
        wait_until("/healthz as uid 1000", api.healthy, timeout=30)
        status, mine = api.call("POST", "/downloads", {"url": origin_url + "/file.bin"})
        api.wait_state(mine["id"], "completed")
        bound = os.path.join(binds[0][0], "file.bin")
        check(sha256(bound) == small_hash and os.stat(bound).st_uid == 1000,
              "--user 1000:1000 on bind mounts of uid 1000 works, files owned by 1000")

        # nginx in front doing TLS, with docker/nginx/haul.conf as it is.
        tls_proxy(work, network, owner, token)
        owner.stop()

        compose_files(work)
        size = image["Size"]
        print(f"docker-test: {len(CHECKS)} checks passed; image {IMAGE} {size / 1e6:.1f} MB, "
              f"binary /usr/local/bin/haul {binary_size / 1e6:.1f} MB", flush=True)
    finally:
        for step in reversed(cleanup):
            try:
                step()
            except Exception as error:  # cleanup goes on past a step that fails
                print(f"docker-test: cleanup: {error}", file=sys.stderr)
        if os.environ.get("HAUL_DOCKER_TEST_KEEP"):
            print(f"docker-test: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def tls_proxy(work, network, haul, token):
    """Runs nginx in the container's namespace, as compose.tls.yaml's second service: /etc/nginx/conf.d/default.conf
    is docker/nginx/haul.conf and `haul` resolves to the container (ip netns exec mounts /etc/netns/NAME/* on /etc)."""
    etc = f"/etc/netns/{network.name}"
    os.makedirs(etc + "/nginx/conf.d")
    os.makedirs(etc + "/nginx/certs")
    shutil.copy(os.path.join(ROOT, "docker/nginx/haul.conf"), etc + "/nginx/conf.d/default.conf")
    with open(etc + "/hosts", "w") as f:
        f.write(f"127.0.0.1 localhost\n::1 localhost\n{network.ip} haul\n")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=haul.test",
         "-addext", f"subjectAltName=IP:{network.ip}", "-keyout", etc + "/nginx/certs/haul.key",
         "-out", etc + "/nginx/certs/haul.crt"])
    logs = os.path.join(work, "proxy")
    os.makedirs(logs)
    # The rest of the official image's nginx.conf: worker, events, and conf.d included inside http.
    with open(etc + "/nginx/nginx.conf", "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {logs}/nginx.pid; error_log {logs}/error.log warn;
events {{ worker_connections 256; }}
http {{ access_log {logs}/access.log; client_body_temp_path {logs}/b; proxy_temp_path {logs}/p;
  fastcgi_temp_path {logs}/f; uwsgi_temp_path {logs}/u; scgi_temp_path {logs}/s;
  include /etc/nginx/conf.d/*.conf; }}
""")
    proxy = subprocess.Popen(["ip", "netns", "exec", network.name, "nginx", "-c", "/etc/nginx/nginx.conf"],
                             stderr=open(logs + "/stderr", "w"))
    try:
        context = ssl.create_default_context(cafile=etc + "/nginx/certs/haul.crt")

        def answering():
            try:
                connection = http.client.HTTPSConnection(network.ip, 443, context=context, timeout=2)
                connection.request("GET", "/healthz")
                return connection.getresponse().status == 200
            except OSError:
                return False
        wait_until("nginx's TLS port", answering, timeout=15)
        note("through nginx's TLS (docker/nginx/haul.conf) /healthz answers, the certificate verified")
        version = run(["curl", "-s", "--http2", "--cacert", etc + "/nginx/certs/haul.crt", "-o", "/dev/null",
                       "-w", "%{http_version}", "-H", f"Authorization: Bearer {token}",
                       f"https://{network.ip}/downloads"]).stdout
        check(version == "2", "the API over TLS speaks HTTP/2 to clients", version)

        # An event stream through the proxy gets each event as it happens.
        stream = http.client.HTTPSConnection(network.ip, 443, context=context, timeout=10)
        stream.request("GET", f"/events?access_token={token}", headers={"Accept": "text/event-stream"})
        reply = stream.getresponse()
        check(reply.status == 200 and reply.getheader("Content-Type", "").startswith("text/event-stream"),
              "GET /events through nginx is an event stream")
        origin_header = {"Origin": f"https://{network.ip}"}
        poster = http.client.HTTPSConnection(network.ip, 443, context=context, timeout=10)
        sent = time.monotonic()
        poster.request("POST", "/downloads", body=json.dumps({"url": "http://127.0.0.1:1/x.bin", "start_paused": True}),
                       headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                                **origin_header})
        posted = poster.getresponse()
        created = json.loads(posted.read())
        check(posted.status == 201, "a state change from the proxied dashboard's own origin is let through",
              str(created))
        seen = None
        while time.monotonic() - sent < 5:
            line = reply.fp.readline().decode()
            if line.startswith("data:") and created["id"] in line:
                seen = time.monotonic() - sent
                break
        check(seen is not None, f"its created event arrives through nginx unbuffered ({(seen or 0) * 1000:.0f} ms after "
              "the POST was sent)")
        stream.close()
        poster.request("POST", "/downloads", body=json.dumps({"url": "http://127.0.0.1:1/y.bin"}),
                       headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                                "Origin": "https://elsewhere.example"})
        refused = poster.getresponse()
        refused.read()
        check(refused.status == 403, "one from another origin is refused", str(refused.status))
    finally:
        proxy.terminate()
        proxy.wait()


def compose_files(work):
    """docker/compose.yaml, compose.tls.yaml and compose.nodes.yaml as Compose reads them (docker compose config, or
    docker-compose's)."""
    if shutil.which("docker") and run(["docker", "compose", "version"], check_status=False).returncode == 0:
        compose, as_json = ["docker", "compose"], ["--format", "json"]
    else:
        compose, as_json = ["docker-compose"], []
    env = dict(os.environ, HAUL_TOKEN=secrets.token_hex(24))
    env.pop("HAUL_PUBLISH", None)

    def config(name, **extra):
        result = run(compose + ["-f", os.path.join(ROOT, "docker", name), "config"] + as_json, check_status=False,
                     env=dict(env, **extra))
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(compose)} config -f docker/{name}: {result.stderr}")
        if as_json:
            return json.loads(result.stdout)
        # docker-compose prints YAML only; Debian's docker-compose brings PyYAML to the system's Python.
        return json.loads(run(["/usr/bin/python3", "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), "
                               "sys.stdout)"], input=result.stdout).stdout)

    def published(service):
        """HOST_IP:PORT:TARGET of each published port, in either of Compose's spellings."""
        return [p.removesuffix("/tcp") if isinstance(p, str)
                else f"{p.get('host_ip', '0.0.0.0')}:{p['published']}:{p['target']}"
                for p in service.get("ports", [])]

    plain = config("compose.yaml")
    haul = plain["services"]["haul"]
    check(published(haul) == ["127.0.0.1:8080:8080"] and haul["user"] == "10001:10001",
          f"{' '.join(compose)} config: compose.yaml publishes 8080 on loopback only, as uid 10001")
    exposed = config("compose.yaml", HAUL_PUBLISH="0.0.0.0:8080", HAUL_USER="1000:1000")["services"]["haul"]
    check(published(exposed) == ["0.0.0.0:8080:8080"] and exposed["user"] == "1000:1000",
          "HAUL_PUBLISH=0.0.0.0:8080 exposes it beyond loopback; HAUL_USER sets the user for bind mounts")
    missing = run(compose + ["-f", os.path.join(ROOT, "docker/compose.yaml"), "config"], check_status=False,
                  env={k: v for k, v in env.items() if k != "HAUL_TOKEN"})
    check(missing.returncode != 0 and "HAUL_TOKEN" in missing.stderr, "compose refuses to start without HAUL_TOKEN")
    tls = config("compose.tls.yaml")
    services = tls["services"]
    mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in services["nginx"]["volumes"]]
    conf = [m.split(":")[0] for m in mounts if m.split(":")[1] == "/etc/nginx/conf.d/default.conf"]
    check(not services["haul"].get("ports") and published(services["nginx"]) == ["0.0.0.0:8443:443"]
          and conf and os.path.samefile(conf[0], os.path.join(ROOT, "docker/nginx/haul.conf")),
          "compose.tls.yaml: Haul unpublished, nginx on 443 with docker/nginx/haul.conf")
    nodes = config("compose.nodes.yaml", POSTGRES_PASSWORD=secrets.token_hex(12))["services"]
    haul_nodes = [nodes[name] for name in ("node1", "node2")]
    shared = [{v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in n["volumes"]} for n in haul_nodes]
    check("postgres" in nodes and all(n["environment"]["HAUL_STORE"] == "postgres://haul@postgres/haul"
                                      for n in haul_nodes)
          and {n["environment"]["HAUL_NODE"] for n in haul_nodes} == {"node1", "node2"}
          and shared[0] == shared[1] and any(m.split(":")[1] == "/downloads" for m in shared[0])
          and [published(n) for n in haul_nodes] == [["127.0.0.1:8081:8080"], ["127.0.0.1:8082:8080"]],
          "compose.nodes.yaml: two nodes of their own names on one PostgreSQL and one download volume")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"docker-test: FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
