#!/usr/bin/env python3
"""CORS as a real browser enforces it (Debian's headless Chromium through selenium).

Serves a page from a second loopback port, the origin given to `--cors-origin`, whose script makes an authorised
JSON POST to Haul: a non-simple request, so Chromium sends a preflight first and refuses the POST unless the
preflight's answer carries exactly one Access-Control-Allow-Origin. The same page from a third port, an origin not
configured, must be refused by the browser and add nothing.

Usage: cors_test.py BUILD_DIR
"""
import http.server
import json
import shutil
import sys
import tempfile
import threading
import urllib.request

from selenium.webdriver.support.ui import WebDriverWait

from dashboard_test import browser, start, stop

TOKEN = "cors-test-token-0123456789abcdef"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>pending</title></head><body>
<pre id="result">pending</pre>
<script>
const api = new URLSearchParams(location.search).get("api");
fetch(api + "/downloads", {
  method: "POST",
  headers: {"Authorization": "Bearer %s", "Content-Type": "application/json"},
  body: JSON.stringify({url: "http://127.0.0.1:9/cors.bin", start_paused: true}),
}).then(async (response) => {
  const body = await response.json();
  document.getElementById("result").textContent = JSON.stringify({status: response.status, id: body.id});
  document.title = "done";
}).catch((error) => {
  document.getElementById("result").textContent = JSON.stringify({error: String(error)});
  document.title = "done";
});
</script></body></html>
""" % TOKEN


def serve_page(page=PAGE):
    """Serves `page` (HTML) at every path of a loopback port of its own: an origin of its own. Returns the server
    and its origin."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def run_page(driver, page_origin, api):
    driver.get(f"{page_origin}/?api={api}")
    WebDriverWait(driver, 20, poll_frequency=0.1).until(lambda d: d.title == "done")
    return json.loads(driver.find_element("id", "result").text)


def stored_downloads(api):
    request = urllib.request.Request(api + "/stats", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["downloads"]


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="haul-cors-")
    allowed, allowed_origin = serve_page()
    other, other_origin = serve_page()
    log = open(f"{work}/haul.log", "w")
    haul, api = start([f"{build}/haul", "serve", "--listen", "127.0.0.1:0", "--download-dir", f"{work}/dl",
                       "--data-dir", f"{work}/data", "--token", TOKEN, "--cors-origin", allowed_origin], log)
    driver = None
    ok = False
    try:
        driver = browser()
        result = run_page(driver, allowed_origin, api)
        assert result.get("status") == 201 and result.get("id"), f"from {allowed_origin}: {result}"
        assert stored_downloads(api) == 1

        refused = run_page(driver, other_origin, api)
        assert "error" in refused, f"a page from {other_origin} was let through: {refused}"
        assert stored_downloads(api) == 1, "the refused page added a download"
        ok = True
        print(f"cors: an authorised JSON POST from {allowed_origin} passed its preflight; {other_origin} was refused")
    finally:
        if driver is not None:
            driver.quit()
        stop(haul)
        allowed.shutdown()
        other.shutdown()
        log.close()
        if not ok:
            print(open(f"{work}/haul.log").read()[-4000:], file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
