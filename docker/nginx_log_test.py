"""docker/nginx/haul.conf as shipped, in front of a real `haul serve`: what it logs of a request carries no query
string, so neither a script's `?access_token=` nor a ticket lands in a log file. (make docker-test runs the same
file in front of the image; this runs without containers, in `make test`.)

    python3 docker/nginx_log_test.py .build/debug
"""
import os, shutil, socket, ssl, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "nginx-log-test-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port):
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listens on {port}")


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="haul-nginx-log-")
    os.chmod(work, 0o755)
    haul = nginx = None
    try:
        haul = subprocess.Popen([f"{build}/haul", "serve", "--listen", "127.0.0.1:0", "--token", TOKEN,
                                 "--download-dir", f"{work}/dl", "--data-dir", f"{work}/data", "--log-level",
                                 "warning"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        haul_port = int(haul.stdout.readline().strip().rsplit(":", 1)[1])
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-keyout", f"{work}/haul.key", "-out", f"{work}/haul.crt"],
                       check=True, capture_output=True)
        # The shipped file, with only what differs on this machine put in place: the upstream's address, the
        # port, the certificate's and the log's paths.
        port = free_port()
        conf = open(f"{ROOT}/docker/nginx/haul.conf").read()
        for old, new in [("server haul:8080;", f"server 127.0.0.1:{haul_port};"),
                         ("listen 443 ssl http2;", f"listen 127.0.0.1:{port} ssl http2;"),
                         ("listen [::]:443 ssl http2;", ""),
                         ("/etc/nginx/certs/", f"{work}/")]:
            assert old in conf, f"haul.conf no longer has '{old}'"
            conf = conf.replace(old, new)
        # Its own access log, else nginx's default one (logs/access.log under the prefix, every request line).
        conf = conf.replace("/var/log/nginx/access.log", f"{work}/logs/access.log")
        with open(f"{work}/haul.conf", "w") as f:
            f.write(conf)
        os.makedirs(f"{work}/logs")
        with open(f"{work}/nginx.conf", "w") as f:
            f.write(f"daemon off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;\n"
                    f"events {{ worker_connections 64; }}\n"
                    f"http {{ client_body_temp_path {work}/b; proxy_temp_path {work}/p; fastcgi_temp_path {work}/f;"
                    f" uwsgi_temp_path {work}/u; scgi_temp_path {work}/s; include {work}/haul.conf; }}\n")
        nginx = subprocess.Popen(["nginx", "-p", work, "-c", f"{work}/nginx.conf"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(port)
        context = ssl.create_default_context(cafile=f"{work}/haul.crt")
        context.check_hostname = False
        base = f"https://127.0.0.1:{port}"

        def status(path):
            try:
                with urllib.request.urlopen(base + path, context=context, timeout=10) as reply:
                    return reply.status
            except urllib.error.HTTPError as refused:
                return refused.code

        assert status("/downloads?state=paused&access_token=x") == 401, "a query token opened /downloads"
        # An event stream opened with the token in its URL: only its status is read.
        assert status(f"/events?access_token={TOKEN}&last_event_id=0") == 200
        time.sleep(0.3)
        log = open(f"{work}/logs/access.log").read()
        assert "/events" in log and "/downloads" in log, log
        for secret in [TOKEN, "access_token", "state=paused", "?"]:
            assert secret not in log, f"the access log holds '{secret}':\n{log}"
        print("nginx log: docker/nginx/haul.conf logs paths without queries (2 requests checked)")
        return 0
    finally:
        for proc in (nginx, haul):
            if proc and proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
