#!/usr/bin/env python3
"""A real browser extension and a hostile page against Haul, in Debian's headless Chromium (selenium from PyPI).

The extension is an unpacked Manifest V3 extension made here (its key generated, so its id is known) and loaded with
--load-extension. It has no host permissions, so its page's requests are cross-origin as a web page's are: a JSON
POST to /jsonrpc (a preflight first), a WebSocket on /jsonrpc and a REST POST must each be answered for its
`chrome-extension://ID` origin without Haul being told of it (--cors-origin), with the token on a server that has
one and without on a server that has none, as aria2c answers them.

The hostile page, served from another loopback port, puts a JSONP script tag and a plain GET script tag for
aria2.tellWaiting on a server without a token: neither may hand it the list (its URLs, signed query strings and all).

Usage: extension_test.py BUILD_DIR
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from cors_test import serve_page
from dashboard_test import start, stop

TOKEN = "extension-test-token-0123456789"

PAGE_JS = """
document.addEventListener("DOMContentLoaded", async () => {
  const params = new URLSearchParams(location.search);
  const api = params.get("api"), token = params.get("token");
  const secret = token ? ["token:" + token] : [];
  const result = {origin: location.origin};
  try {
    const rpc = await fetch(api + "/jsonrpc", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({jsonrpc: "2.0", id: "add", method: "aria2.addUri",
                            params: [...secret, ["http://127.0.0.1:9/from-extension.bin"], {pause: "true"}]}),
    });
    result.rpc = {status: rpc.status, body: await rpc.json()};
  } catch (error) { result.rpc = {error: String(error)}; }
  try {
    const headers = {"Content-Type": "application/json"};
    if (token) headers["Authorization"] = "Bearer " + token;
    const rest = await fetch(api + "/downloads", {method: "POST", headers,
      body: JSON.stringify({url: "http://127.0.0.1:9/rest-from-extension.bin", start_paused: true})});
    result.rest = {status: rest.status};
  } catch (error) { result.rest = {error: String(error)}; }
  result.socket = await new Promise((resolve) => {
    let socket;
    try { socket = new WebSocket(api.replace("http", "ws") + "/jsonrpc"); }
    catch (error) { return resolve({error: String(error)}); }
    socket.onopen = () => socket.send(JSON.stringify({jsonrpc: "2.0", id: "stat", method: "aria2.getGlobalStat",
                                                      params: secret}));
    socket.onmessage = (message) => { resolve({answer: JSON.parse(message.data)}); socket.close(); };
    socket.onerror = () => resolve({error: "the socket failed"});
    setTimeout(() => resolve({error: "no answer in 10 s"}), 10000);
  });
  document.getElementById("result").textContent = JSON.stringify(result);
  document.title = "done";
});
"""

PAGE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>pending</title>
<script src="page.js"></script></head><body><pre id="result">pending</pre></body></html>"""

HOSTILE = """<!doctype html><html><head><meta charset="utf-8"><title>pending</title></head><body>
<pre id="result">nothing</pre>
<script>
let pending = 2;
function finish() { if (--pending === 0) document.title = "done"; }
function steal(answer) { document.getElementById("result").textContent = "stolen: " + JSON.stringify(answer); }
function add(src) {
  const tag = document.createElement("script");
  tag.src = src; tag.onload = finish; tag.onerror = finish;
  document.body.appendChild(tag);
}
const params = btoa(JSON.stringify([0, 100]));
const api = new URLSearchParams(location.search).get("api");
add(api + "/jsonrpc?method=aria2.tellWaiting&id=1&params=" + params + "&jsoncallback=steal");
add(api + "/jsonrpc?method=aria2.tellWaiting&id=2&params=" + params);
</script></body></html>"""


def make_extension(directory):
    """An unpacked MV3 extension with a key of its own; returns its id (from the key, as Chromium derives it)."""
    os.makedirs(directory)
    subprocess.run(["openssl", "genrsa", "-out", f"{directory}/key.pem", "2048"], check=True, capture_output=True)
    der = subprocess.run(["openssl", "rsa", "-in", f"{directory}/key.pem", "-pubout", "-outform", "DER"],
                         check=True, capture_output=True).stdout
    os.remove(f"{directory}/key.pem")
    with open(f"{directory}/manifest.json", "w") as f:
        json.dump({"manifest_version": 3, "name": "haul-extension-test", "version": "1.0",
                   "key": base64.b64encode(der).decode()}, f)
    with open(f"{directory}/page.html", "w") as f:
        f.write(PAGE_HTML)
    with open(f"{directory}/page.js", "w") as f:
        f.write(PAGE_JS)
    return "".join(chr(ord("a") + int(c, 16)) for c in hashlib.sha256(der).hexdigest()[:32])


def browser(extension):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                 f"--load-extension={extension}", f"--disable-extensions-except={extension}"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def run(driver, url):
    driver.get(url)
    WebDriverWait(driver, 30, poll_frequency=0.1).until(lambda d: d.title == "done")
    return driver.find_element("id", "result").text


def stored(api, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(api + "/stats", headers=headers), timeout=10) as response:
        return json.load(response)["downloads"]


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="haul-extension-")
    extension_id = make_extension(f"{work}/extension")
    log = open(f"{work}/haul.log", "w")
    servers = []
    hostile, hostile_origin = serve_page(HOSTILE)
    driver = None
    ok = False
    try:
        for name, token in (("guarded", TOKEN), ("open", None)):
            argv = [f"{build}/haul", "serve", "--listen", "127.0.0.1:0", "--download-dir", f"{work}/{name}/dl",
                    "--data-dir", f"{work}/{name}/data"] + (["--token", token] if token else [])
            servers.append((name, token, *start(argv, log)))
        driver = browser(f"{work}/extension")
        for name, token, _, api in servers:
            query = f"?api={api}" + (f"&token={token}" if token else "")
            result = json.loads(run(driver, f"chrome-extension://{extension_id}/page.html{query}"))
            assert result["origin"] == f"chrome-extension://{extension_id}", result
            gid = result["rpc"].get("body", {}).get("result", "")
            assert result["rpc"].get("status") == 200 and len(gid) == 16, f"{name}: the RPC POST: {result}"
            assert result["rest"].get("status") == 201, f"{name}: the REST POST: {result}"
            assert "numActive" in result["socket"].get("answer", {}).get("result", {}), f"{name}: the socket: {result}"
            assert stored(api, token) == 2, f"{name}: {stored(api, token)} downloads stored"
        # A page of another site on the server without a token: its script tags get no list.
        _, _, _, open_api = servers[1]
        seen = run(driver, f"{hostile_origin}/?api={open_api}")
        assert not seen.startswith("stolen"), f"a page read the list by JSONP: {seen}"
        ok = True
        print(f"extension: chrome-extension://{extension_id} used the aria2 front (POST and WebSocket) and REST on "
              "a server with a token and one without; a page's JSONP and GET script tags read nothing")
        print("extension: 2 passed, 0 failed")
    finally:
        if driver is not None:
            driver.quit()
        for _, _, proc, _ in servers:
            stop(proc)
        hostile.shutdown()
        log.close()
        if not ok:
            print(open(f"{work}/haul.log").read()[-4000:], file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
