#!/usr/bin/env python3
"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, selenium from PyPI).

Starts TestOrigin and a `haul serve` with a token on loopback, opens the page and gives it the token, then uses it
as a person would: adds several URLs in one go (a bad line stays in the box with its reason), pauses and resumes
a download from its row, restarts the server under the page (the page reconnects its event stream by itself),
fetches the finished file from its link (sha256), searches and sorts, watches a download wait to retry, selects
rows and acts on them at once, removes a download with its file, clears the completed ones, changes the settings
(persisted: they are there after a reload), and scrolls through 10,000 downloads, of which only the rows on screen
are drawn. Screenshots of the list, a selection, the settings and the compact view of 10,000 go to SCREENSHOT_DIR
(`make test`: .build/screenshots; `make screenshots` refreshes the committed ones in dashboard/screenshots).

Usage: dashboard_test.py BUILD_DIR [SCREENSHOT_DIR]
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

TOKEN = "dashboard-test-token-0123456789"


def start(argv, log):
    """Starts a server that prints '... listening on http://HOST:PORT' first; returns (process, base URL)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        raise RuntimeError(f"{argv[0]} did not start: {line!r}")
    return proc, line[line.index("http://"):].strip()


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1400,900", "--no-first-run", "--disable-extensions"]:
        options.add_argument(flag)
    # The performance log lists every request the page sends: no URL of them may carry the token.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


class Page:
    """The dashboard as its user sees it: rows by download, the forms, the list's controls."""

    def __init__(self, driver, base):
        self.driver, self.base = driver, base
        self.sent = []
        self.wait = WebDriverWait(driver, 30, poll_frequency=0.1)

    def find(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def rows(self):
        return self.driver.find_elements(By.CSS_SELECTOR, "#spacer .item")

    def row(self, name):
        """The row whose name is `name`, once it is drawn."""
        def found(_):
            for row in self.rows():
                if row.get_attribute("data-name") == name:
                    return row
            return False
        return self.wait.until(found)

    def state(self, row):
        return row.get_attribute("data-state")

    def percent(self, row):
        text = row.find_element(By.CSS_SELECTOR, ".percent").text.rstrip("%")
        return int(text) if text else -1

    def search(self, text):
        """Types into the search box as a person would (selenium's clear() sends no input event)."""
        self.driver.execute_script(
            "const box = document.getElementById('search'); box.value = arguments[0];"
            "box.dispatchEvent(new Event('input'));", text)

    def names_in_order(self):
        """The names of the rows drawn, top to bottom (rows are placed by transform)."""
        placed = self.driver.execute_script(
            "return [...document.querySelectorAll('#spacer .item')].map(r => "
            "[new DOMMatrix(getComputedStyle(r).transform).m42, r.dataset.name])")
        return [name for _, name in sorted(placed)]

    def requested(self):
        """The URLs of the requests the page sent since the last call (the browser's performance log)."""
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        self.sent.extend(urls)
        return urls

    def api(self, method, path, body=None):
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            data = reply.read()
            return json.loads(data) if data else None


def main():
    build = sys.argv[1]
    shots = sys.argv[2] if len(sys.argv) > 2 else os.path.join(build, "..", "screenshots")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="haul-dashboard-")
    os.makedirs(f"{work}/www")
    files = {"debian.iso": os.urandom(2 << 20), "ubuntu.iso": os.urandom(300_000), "busy.bin": os.urandom(50_000)}
    for name, data in files.items():
        with open(f"{work}/www/{name}", "wb") as f:
            f.write(data)
    log = open(f"{work}/servers.log", "w")
    origin, origin_url = start([f"{build}/TestOrigin", "--root", f"{work}/www"], log)
    haul_argv = [f"{build}/haul", "serve", "--download-dir", f"{work}/dl", "--data-dir", f"{work}/data",
                 "--min-free-space", "16M", "--token", TOKEN, "--connections", "2", "--max-downloads", "20000"]
    haul, base = start(haul_argv + ["--listen", "127.0.0.1:0"], log)
    driver = None
    ok = False
    try:
        driver = browser()
        page = Page(driver, base)
        wait = page.wait
        driver.get(base + "/")

        # The API answers 401 without the token: the page asks for it once and keeps it.
        wait.until(lambda d: page.find("#token-form").is_displayed())
        page.find("#token").send_keys(TOKEN)
        page.find("#token-form button").click()
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        assert driver.execute_script("return localStorage.getItem('haul.token')") == TOKEN

        # A bad URL alone gets the server's problem under the form.
        page.find("#urls").send_keys("ftp://example.com/x")
        page.find("#add").click()
        wait.until(lambda d: "url: scheme must be http or https" in page.find("#add-problem").text)
        page.find("#urls").clear()

        # Several lines go as one batch: the good ones are added, the bad one stays with its reason.
        # 2 MiB trickled at 256 KiB/s takes about 8 s, time enough to pause it on the way.
        page.find("#urls").send_keys(f"{origin_url}/files/debian.iso?rate=262144\nftp://nope/x\n"
                                     f"{origin_url}/files/ubuntu.iso")
        page.find("#add").click()
        wait.until(lambda d: page.find("#urls").get_attribute("value") == "ftp://nope/x")
        assert page.find("#add-problem").text.startswith("ftp://nope/x: url: scheme must be http or https"), \
            page.find("#add-problem").text
        debian = page.row("debian.iso")
        wait.until(lambda d: page.state(debian) == "downloading" and page.percent(debian) > 0)
        wait.until(lambda d: debian.find_element(By.CSS_SELECTOR, ".speed").text.endswith("/s"))
        page.find("#urls").clear()

        debian.find_element(By.CSS_SELECTOR, ".pause").click()
        wait.until(lambda d: page.state(debian) == "paused")
        paused_at = page.percent(debian)
        time.sleep(1)
        assert page.percent(debian) == paused_at, "a paused download moved on"
        assert page.percent(debian) < 100

        # Resume: restart the server under the page first, so the rest arrives over a reconnected stream.
        stop(haul)
        port = base.rsplit(":", 1)[1]
        haul, _ = start(haul_argv + ["--listen", f"127.0.0.1:{port}"], log)
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        debian.find_element(By.CSS_SELECTOR, ".resume").click()
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: page.state(debian) == "completed")
        assert page.percent(debian) == 100, debian.text
        with open(f"{work}/dl/debian.iso", "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(files["debian.iso"]).hexdigest()

        # The finished file is a link without the token; a click opens it with a one-minute ticket instead, and
        # what the ticket opens is the file (fetched without any header).
        link = debian.find_element(By.CSS_SELECTOR, "a.file")
        href = link.get_attribute("href")
        assert link.is_displayed() and href.endswith(f"/downloads/{debian.get_attribute('data-id')}/file"), href
        link.click()
        wait.until(lambda d: any("/file?ticket=" in url for url in page.requested()))
        digest = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            ticketed(new URL(arguments[0]).pathname).then(url => fetch(url, {credentials: 'omit'}))
              .then(r => r.arrayBuffer()).then(b => crypto.subtle.digest('SHA-256', b))
              .then(h => done([...new Uint8Array(h)].map(x => x.toString(16).padStart(2, '0')).join('')));
            """, href)
        assert digest == hashlib.sha256(files["debian.iso"]).hexdigest(), "the link serves another file"
        ubuntu = page.row("ubuntu.iso")
        wait.until(lambda d: page.state(ubuntu) == "completed")

        # Search and sort.
        page.search("UBUNTU")
        wait.until(lambda d: page.names_in_order() == ["ubuntu.iso"])
        page.search("")
        wait.until(lambda d: len(page.rows()) == 2)
        Select(page.find("#sort")).select_by_value("name")
        wait.until(lambda d: page.names_in_order() == ["debian.iso", "ubuntu.iso"])
        Select(page.find("#sort")).select_by_value("-size")
        wait.until(lambda d: page.names_in_order() == ["debian.iso", "ubuntu.iso"])
        Select(page.find("#sort")).select_by_value("size")
        wait.until(lambda d: page.names_in_order() == ["ubuntu.iso", "debian.iso"])
        Select(page.find("#sort")).select_by_value("-created")

        # A download that waits to try again says so, and why; then it finishes.
        page.find("#urls").send_keys(f"{origin_url}/files/busy.bin?fail=3&status=503")
        page.find("#add").click()
        busy = page.row("busy.bin")
        wait.until(lambda d: "retrying in" in busy.find_element(By.CSS_SELECTOR, ".info").text)
        assert "http_503" in busy.find_element(By.CSS_SELECTOR, ".info").text
        Select(page.find("#filter")).select_by_value("retrying")
        wait.until(lambda d: page.names_in_order() in (["busy.bin"], []))
        Select(page.find("#filter")).select_by_value("")
        WebDriverWait(driver, 30).until(lambda d: page.state(page.row("busy.bin")) == "completed")

        # A failing download shows its error and a Retry button.
        page.find("#urls").send_keys(f"{origin_url}/files/missing.iso")
        page.find("#add").click()
        missing = page.row("missing.iso")
        wait.until(lambda d: page.state(missing) == "failed")
        assert "http_404" in missing.find_element(By.CSS_SELECTOR, ".info").text
        assert missing.find_element(By.CSS_SELECTOR, ".retry").is_displayed()
        page.api("POST", "/downloads", {"downloads": [{"url": f"{origin_url}/files/later-{n}.iso",
                                                        "start_paused": True} for n in range(3)]})
        wait.until(lambda d: "7 downloads" in page.find("#totals").text)
        driver.save_screenshot(os.path.join(shots, "list.png"))

        # Select rows and act on them at once: the three paused ones resumed, then removed.
        for n in range(3):
            page.row(f"later-{n}.iso").find_element(By.CSS_SELECTOR, ".select").click()
        wait.until(lambda d: page.find("#selection-count").text == "3 selected")
        driver.save_screenshot(os.path.join(shots, "selection.png"))
        page.find("#bulk-pause").click()
        page.find("#bulk-remove").click()
        wait.until(lambda d: "4 downloads" in page.find("#totals").text)
        assert page.find("#selection").get_attribute("hidden") is not None
        # Select all rows shown (a search narrows them) and remove them.
        page.search("missing")
        wait.until(lambda d: page.names_in_order() == ["missing.iso"])
        page.find("#select-all").click()
        page.find("#bulk-remove").click()
        wait.until(lambda d: "3 downloads" in page.find("#totals").text)
        page.search("")

        # Remove a finished download with its file; clear the finished ones, whose files stay.
        page.row("ubuntu.iso").find_element(By.CSS_SELECTOR, ".delete").click()
        wait.until(lambda d: "2 downloads" in page.find("#totals").text)
        assert not os.path.exists(f"{work}/dl/ubuntu.iso"), "Remove + file left the file"
        page.find("#clear-completed").click()
        wait.until(lambda d: "0 downloads" in page.find("#totals").text)
        assert os.path.exists(f"{work}/dl/debian.iso"), "clearing the list deleted a file"

        # Settings: changed in the panel, in force at once, still there after a reload.
        page.find("#settings-panel summary").click()
        page.find("#set-max-active").send_keys("2")
        page.find("#set-max-speed").send_keys("1.5M")
        page.find("#add-window").click()
        window = page.find("#schedule .window")
        window.find_element(By.CSS_SELECTOR, ".from").send_keys("00:00")
        window.find_element(By.CSS_SELECTOR, ".to").send_keys("00:00")
        window.find_element(By.CSS_SELECTOR, ".speed").send_keys("500k")
        page.find("#save-settings").click()
        wait.until(lambda d: page.find("#settings-saved").text == "Saved.")
        settings = page.api("GET", "/settings")
        assert settings["max_active"] == 2 and settings["max_speed"] == 1_572_864, settings
        assert settings["speed_schedule"] == [{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                                               "from": "00:00", "to": "00:00", "max_speed": 512_000}], settings
        assert settings["current_max_speed"] == 512_000, settings
        wait.until(lambda d: page.find("#limit").text == "limit 500.0 KiB/s")
        # The header tells the free space downloads may still take, as /stats has it.
        wait.until(lambda d: page.find("#disk").text.endswith(" free for downloads"))
        assert page.api("GET", "/stats")["disk"]["usable_bytes"] >= 0
        driver.save_screenshot(os.path.join(shots, "settings.png"))
        driver.refresh()
        wait.until(lambda d: page.find("#set-max-active").get_attribute("value") == "2")
        assert page.find("#set-max-speed").get_attribute("value") == "1536k"
        assert len(driver.find_elements(By.CSS_SELECTOR, "#schedule .window")) == 1
        page.api("PATCH", "/settings", {"max_active": None, "max_speed": None, "speed_schedule": None})

        # Webhooks: added from the panel (its secret shown once), listed, removed.
        page.find("#webhooks-panel summary").click()
        wait.until(lambda d: page.find("#webhook-list").text == "No webhooks.")
        page.find("#webhook-url").send_keys("http://127.0.0.1:9/hook")
        page.find("#webhook-category").send_keys("films")
        page.find("#webhook-events input[value='removed']").click()
        # A category that does not exist yet is refused with the reason (a typo never makes a deaf webhook).
        page.find("#add-webhook").click()
        wait.until(lambda d: "no category 'films'" in page.find("#webhook-problem").text)
        assert page.api("GET", "/webhooks")["webhooks"] == []
        page.api("PUT", "/categories/films", {})
        page.find("#add-webhook").click()
        wait.until(lambda d: "shown this once: whsec_" in page.find("#webhook-secret").text)
        hooks = page.api("GET", "/webhooks")["webhooks"]
        assert [(h["url"], h["events"], h["category"]) for h in hooks] == [
            ("http://127.0.0.1:9/hook", ["created", "completed", "failed"], "films")], hooks
        wait.until(lambda d: "http://127.0.0.1:9/hook: created, completed, failed (category films)"
                   in page.find("#webhook-list").text)
        driver.save_screenshot(os.path.join(shots, "webhooks.png"))
        page.find("#webhook-list button").click()
        wait.until(lambda d: page.find("#webhook-list").text == "No webhooks.")
        assert page.api("GET", "/webhooks")["webhooks"] == []

        # A category from the add form: the download is the category's.
        page.api("PUT", "/categories/films", {"directory": "media/films"})
        page.find("#add-form details summary").click()
        page.find("#category").send_keys("films")
        page.find("#start_paused").click()
        page.find("#filename").send_keys("custom.bin")
        page.find("#checksum").send_keys("sha256:" + "0" * 64)
        page.find("#urls").send_keys("http://127.0.0.1:9/film.mkv")
        page.find("#add").click()
        wait.until(lambda d: len(page.api("GET", "/downloads?category=films")["downloads"]) == 1)
        film = page.api("GET", "/downloads?category=films")["downloads"][0]
        assert film["category"] == "films" and film["state"] == "paused", film
        assert film["filename"] == "custom.bin" and film["checksum"], film
        # The name and checksum were that URL's: cleared. What stays is said beside the collapsed "Options".
        wait.until(lambda d: page.find("#filename").get_attribute("value") == "")
        assert page.find("#checksum").get_attribute("value") == ""
        page.find("#add-form details summary").click()
        summary = page.find("#options-summary").text
        assert "start paused" in summary and "category films" in summary and "named" not in summary, summary
        page.find("#urls").send_keys("http://127.0.0.1:9/film2.mkv")
        page.find("#add").click()
        wait.until(lambda d: len(page.api("GET", "/downloads?category=films")["downloads"]) == 2)
        second = [d for d in page.api("GET", "/downloads?category=films")["downloads"] if d["id"] != film["id"]][0]
        assert second["filename"] is None and second["checksum"] is None, second
        assert second["state"] == "paused", second
        # Two URLs with one name are refused before anything is sent.
        page.find("#add-form details summary").click()
        page.find("#filename").send_keys("same.bin")
        page.find("#urls").send_keys("http://127.0.0.1:9/a.mkv\nhttp://127.0.0.1:9/b.mkv")
        page.find("#add").click()
        wait.until(lambda d: "one URL's" in page.find("#add-problem").text)
        assert len(page.api("GET", "/downloads?category=films")["downloads"]) == 2
        driver.execute_script("for (const id of ['urls', 'filename', 'category']) document.getElementById(id).value = '';"
                              "document.getElementById('start_paused').checked = false;")
        page.api("DELETE", "/downloads?category=films&state=paused")
        page.api("DELETE", "/categories/films")

        # A download with a mirror says how many sources it has.
        mirrored = page.api("POST", "/downloads", {"url": "http://127.0.0.1:9/mirrored.iso", "start_paused": True,
                                                   "mirrors": ["http://127.0.0.1:10/mirrored.iso"]})
        # Read in one script: the rows are redrawn as events come, so a row found earlier may be gone.
        info = ("const row = [...document.querySelectorAll('#spacer .item')].find(r => r.dataset.name === arguments[0]);"
                "return row ? row.querySelector('.info').textContent : null;")
        wait.until(lambda d: d.execute_script(info, "mirrored.iso") == "2 of 2 sources")
        page.api("DELETE", f"/downloads/{mirrored['id']}")

        # 10,000 downloads: the page draws the rows on screen only, and scrolls to the oldest.
        driver.get("about:blank")
        for chunk in range(10):
            page.api("POST", "/downloads", {"downloads": [
                {"url": f"http://127.0.0.1:9/many/{chunk * 1000 + n}.bin", "start_paused": True}
                for n in range(1000)]})
        started = time.monotonic()
        driver.get(base + "/")
        wait.until(lambda d: page.find("#totals").text.startswith("10,000 downloads"))
        loaded = time.monotonic() - started
        drawn = len(page.rows())
        assert drawn < 80, f"{drawn} rows drawn for 10,000 downloads"
        page.find("#density").click()
        wait.until(lambda d: driver.execute_script("return document.body.dataset.density") == "compact")
        driver.save_screenshot(os.path.join(shots, "compact-10000.png"))
        scroll = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const viewport = document.getElementById('viewport');
            const times = [];
            let step = 0;
            function next() {
              const t = performance.now();
              viewport.scrollTop = (viewport.scrollHeight - viewport.clientHeight) * (step / 20);
              requestAnimationFrame(() => {
                times.push(performance.now() - t);
                step += 1;
                if (step <= 20) next(); else done(times);
              });
            }
            next();
            """)
        wait.until(lambda d: "0.bin" in page.names_in_order()[-1:])
        assert len(page.rows()) < 80, len(page.rows())
        print(f"dashboard: 10,000 downloads loaded in {loaded:.2f} s, {drawn} rows drawn; "
              f"21 scroll steps, frame times median {sorted(scroll)[10]:.1f} ms, max {max(scroll):.1f} ms")
        page.search("/9999.bin")
        wait.until(lambda d: page.names_in_order() == ["9999.bin"])

        # No URL the page asked for carried the token (streams and files open with tickets).
        page.requested()
        assert page.sent and any("/events?" in url and "ticket=" in url for url in page.sent), page.sent[:20]
        leaked = [url for url in page.sent if TOKEN in url or "access_token" in url]
        assert not leaked, leaked

        # Nothing the page did was refused by its own Content-Security-Policy or threw.
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
                  and "Failed to load resource" not in e["message"]]
        assert not errors, errors
        ok = True
        print(f"dashboard: passed (screenshots in {shots})")
    finally:
        if driver is not None:
            if not ok:
                driver.save_screenshot(os.path.join(shots, "failure.png"))
                print(f"dashboard: FAILED, screenshot {shots}/failure.png", file=sys.stderr)
            driver.quit()
        stop(haul)
        stop(origin)
        log.close()
        if not ok:
            sys.stderr.write(open(f"{work}/servers.log").read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
