#!/usr/bin/env python3
"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, selenium from PyPI).

Starts TestOrigin and a `haul serve` with a token on loopback (its time zone set, to be named beside the schedule),
opens the page and gives it the token, then uses it as a person would, first at 1400 x 1000: makes a category in
its form and adds downloads into it from the add dialog (a bad line stays with its reason), pauses and resumes from
a row, stops the server mid-download (a banner says so, rows go stale, an action says the server cannot be reached
instead of "Failed to fetch") and starts it again (all clears, the download completes, sha256), opens a row's
details (the whole error, the segments, changes speed, connections and priority), moves waiting downloads in the
queue from the row menu, asks before removing a file, removing a selection and clearing the completed (files kept or
deleted as chosen), refuses a schedule window without a limit, shows a webhook's deliveries, searches, sorts, and
scrolls through 10,000 downloads, of which only the rows on screen are drawn, keeping each view's scroll position;
with a read-only token it shows no button the token cannot use.

Then the same tour at 1400, 1024 and 420 px wide: the list, the details, the menu, each dialog, the confirmation and
the banner of a server stopped and started again, each with a screenshot, checking on each that nothing leaves the
window (no page scroll, no horizontal overflow, every button reachable) and that the list gets the height.
Screenshots go to SCREENSHOT_DIR (`make test`: .build/screenshots; `make screenshots` refreshes the committed ones in
dashboard/screenshots).

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
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import Select, WebDriverWait

TOKEN = "dashboard-test-token-0123456789"
WIDTHS = [(1400, 1000), (1024, 768), (420, 860)]


def start(argv, log, env=None):
    """Starts a server that prints '... listening on http://HOST:PORT' first; returns (process, base URL)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
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
                 "--window-size=1400,1000", "--no-first-run", "--disable-extensions"]:
        options.add_argument(flag)
    # The performance log lists every request the page sends: no URL of them may carry the token.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


class Page:
    """The dashboard as its user sees it: rows by download, the dialogs, the list's controls."""

    def __init__(self, driver, base):
        self.driver, self.base = driver, base
        self.sent = []
        # Rows and lists are redrawn as events come: an element found a moment ago may be gone, and is found again.
        self.wait = WebDriverWait(driver, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])

    def find(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

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

    def cell(self, name, selector):
        """The text of a cell of `name`'s row, read in one script (rows are redrawn as events come)."""
        return self.js("const row = [...document.querySelectorAll('#spacer .item')]"
                       ".find(r => r.dataset.name === arguments[0]);"
                       "return row ? row.querySelector(arguments[1]).textContent : null;", name, selector)

    def state(self, name):
        return self.js("const row = [...document.querySelectorAll('#spacer .item')]"
                       ".find(r => r.dataset.name === arguments[0]); return row ? row.dataset.state : null;", name)

    def percent(self, name):
        text = (self.cell(name, ".percent") or "").rstrip("%")
        return int(text) if text else -1

    def type(self, selector, text):
        """Sets a field as a person's typing would (selenium's clear() sends no input event)."""
        self.js("const box = document.querySelector(arguments[0]); box.value = arguments[1];"
                "box.dispatchEvent(new Event('input')); box.dispatchEvent(new Event('change'));", selector, text)

    def search(self, text):
        self.type("#search", text)

    def names_in_order(self):
        """The names of the rows drawn, top to bottom (rows are placed by transform)."""
        placed = self.js("return [...document.querySelectorAll('#spacer .item')].map(r => "
                         "[new DOMMatrix(getComputedStyle(r).transform).m42, r.dataset.name])")
        return [name for _, name in sorted(placed)]

    def menu(self, name, item):
        """Opens `name`'s row menu and picks `item` (its data-action or data-move)."""
        row = self.row(name)
        self.js("arguments[0].scrollIntoView({block: 'center'})", row)
        row.find_element(By.CSS_SELECTOR, ".more").click()
        self.wait.until(lambda d: self.find("#row-menu").is_displayed())
        self.find(f"#row-menu [data-action='{item}'], #row-menu [data-move='{item}']").click()

    def open_detail(self, name):
        # The state's cell: a completed row's name is a link to its file.
        self.row(name).find_element(By.CSS_SELECTOR, ".col-state").click()
        self.wait.until(lambda d: self.find("#detail").is_displayed()
                        and self.find("#detail-name").text == name)

    def detail_field(self, label):
        return self.js("const terms = [...document.querySelectorAll('#detail-fields dt')];"
                       "const term = terms.find(t => t.textContent === arguments[0]);"
                       "return term ? term.nextElementSibling.textContent : null;", label)

    def confirm(self, ok, files=None):
        """Answers the confirmation dialog: OK or Cancel, ticking "also delete the files" if asked."""
        self.wait.until(lambda d: self.find("#confirm-dialog").is_displayed())
        if files is not None and files != self.find("#confirm-files").is_selected():
            self.find("#confirm-files").click()
        self.find("#confirm-ok" if ok else "#confirm-cancel").click()
        self.wait.until(lambda d: not self.find("#confirm-dialog").is_displayed())

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

    def fits(self, what):
        """Nothing of the page leaves the window: no page scroll either way, each visible button and field inside
        it (the list scrolls, not the page), none of them under another."""
        problems = self.js("""
            const out = [];
            const width = window.innerWidth, height = window.innerHeight;
            const page = document.scrollingElement;
            if (page.scrollWidth > width + 1) out.push(`the page is ${page.scrollWidth} px wide in ${width}`);
            if (page.scrollHeight > height + 1) out.push(`the page scrolls: ${page.scrollHeight} px in ${height}`);
            const list = document.getElementById('viewport');
            if (list.scrollWidth > list.clientWidth + 1)
              out.push(`the list is ${list.scrollWidth} px wide in ${list.clientWidth}: it scrolls sideways`);
            const dialog = document.querySelector('dialog[open]');
            const detail = document.querySelector('#detail:not([hidden])');
            // What covers the page on purpose (a dialog, the details over a narrow window) is what is checked.
            const overlay = dialog || (detail && getComputedStyle(detail).position === 'fixed' ? detail : null);
            const scope = overlay || document;
            for (const element of scope.querySelectorAll('button, input, select, textarea, .state, .name')) {
              if (element.closest('[hidden], template, #row-menu[hidden]')) continue;
              const box = element.getBoundingClientRect();
              if (!box.width || !box.height) continue;
              if (element.closest('#viewport')) {
                const view = document.getElementById('viewport').getBoundingClientRect();
                if (box.bottom < view.top || box.top > view.bottom) continue;
              }
              if (box.left < -1 || box.right > width + 1)
                out.push(`${element.id || element.className || element.tagName} '${element.textContent.trim().slice(0, 30)}' leaves the window: ${Math.round(box.left)}..${Math.round(box.right)} of ${width}`);
              if (element.matches('.state, button') && element.scrollWidth > element.clientWidth + 1)
                out.push(`${element.className || element.tagName} '${element.textContent.trim()}' is cut`);
              // In a row, a badge or a button stays inside its column.
              const cell = element.closest('.item .cell');
              if (cell && element !== cell && element.matches('.state, button')) {
                const column = cell.getBoundingClientRect();
                if (box.left < column.left - 1 || box.right > column.right + 1)
                  out.push(`${element.className} '${element.textContent.trim()}' overflows its column`);
              }
              if (!element.closest('dialog, #viewport, #row-menu') && overlay === null) {
                const x = Math.min(width - 1, Math.max(0, box.left + box.width / 2));
                const y = Math.min(height - 1, Math.max(0, box.top + box.height / 2));
                const top = document.elementFromPoint(x, y);
                if (top && top !== element && !element.contains(top) && !top.contains(element) && !top.closest('label'))
                  out.push(`${element.id || element.className} is under ${top.id || top.className || top.tagName}`);
              }
            }
            return out;""")
        assert not problems, f"{what}: {problems}"


def main():
    build = sys.argv[1]
    shots = sys.argv[2] if len(sys.argv) > 2 else os.path.join(build, "..", "screenshots")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="haul-dashboard-")
    os.makedirs(f"{work}/www")
    files = {"debian.iso": os.urandom(2 << 20), "ubuntu.iso": os.urandom(300_000), "busy.bin": os.urandom(50_000),
             "film.mkv": os.urandom(400_000), "slow.bin": os.urandom(6 << 20)}
    for name, data in files.items():
        with open(f"{work}/www/{name}", "wb") as f:
            f.write(data)
    log = open(f"{work}/servers.log", "w")
    origin, origin_url = start([f"{build}/TestOrigin", "--root", f"{work}/www"], log)
    haul_argv = [f"{build}/haul", "serve", "--download-dir", f"{work}/dl", "--data-dir", f"{work}/data",
                 "--min-free-space", "16M", "--token", TOKEN, "--connections", "2", "--max-downloads", "20000"]
    # The schedule's times are the server's: the page names its zone.
    haul_env = dict(os.environ, TZ="Asia/Tokyo")
    haul, base = start(haul_argv + ["--listen", "127.0.0.1:0"], log, haul_env)
    port = base.rsplit(":", 1)[1]

    def restart():
        nonlocal haul
        haul, _ = start(haul_argv + ["--listen", f"127.0.0.1:{port}"], log, haul_env)

    driver = None
    ok = False
    try:
        driver = browser()
        page = Page(driver, base)
        wait = page.wait
        driver.get(base + "/")

        # The API answers 401 without the token: the page asks for it once and keeps it.
        wait.until(lambda d: page.find("#token-dialog").is_displayed())
        page.find("#token").send_keys(TOKEN)
        page.find("#token-form button[type=submit]").click()
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        assert driver.execute_script("return localStorage.getItem('haul.token')") == TOKEN

        # A category from its form in the sidebar: folder, connections, speed limit, priority.
        page.find("#new-category").click()
        page.type("#cat-name", "films")
        page.type("#cat-directory", "media/films")
        page.type("#cat-connections", "4")
        page.type("#cat-max-speed", "5M")
        page.type("#cat-priority", "2")
        page.find("#category-save").click()
        wait.until(lambda d: not page.find("#category-dialog").is_displayed())
        films = page.api("GET", "/categories/films")
        assert (films["directory"], films["connections"], films["max_speed"], films["priority"]) == \
            ("media/films", 4, 5 << 20, 2), films
        wait.until(lambda d: "films" in page.find("#category-filters").text)
        # A name that can be none says what a name may be.
        page.find("#new-category").click()
        page.type("#cat-name", "bad/name")
        page.find("#category-save").click()
        wait.until(lambda d: "letters, digits" in page.find("#category-problem").text)
        page.find("#category-dialog .close-dialog").click()

        # The add dialog: a bad URL alone gets the server's problem; several lines go as one batch, the bad one
        # stays with its reason. The category is a choice of the ones there are.
        page.find("#open-add").click()
        wait.until(lambda d: page.find("#add-dialog").is_displayed())
        assert [o.text for o in Select(page.find("#category")).options] == ["none", "films"]
        page.find("#urls").send_keys("gopher://example.com/x")
        page.find("#add").click()
        wait.until(lambda d: "url: scheme must be http, https, ftp, ftps or sftp" in page.find("#add-problem").text)
        page.find("#urls").clear()
        # 2 MiB trickled at 256 KiB/s takes about 8 s, time enough to pause it on the way.
        page.find("#urls").send_keys(f"{origin_url}/files/debian.iso?rate=262144\ngopher://nope/x\n"
                                     f"{origin_url}/files/ubuntu.iso")
        page.find("#add").click()
        wait.until(lambda d: page.find("#urls").get_attribute("value") == "gopher://nope/x")
        assert page.find("#add-problem").text.startswith("gopher://nope/x: url: scheme must be http, https, ftp, ftps or sftp"), \
            page.find("#add-problem").text
        page.find("#urls").clear()
        Select(page.find("#category")).select_by_value("films")
        page.type("#priority", "7")
        page.find("#urls").send_keys(f"{origin_url}/files/film.mkv?rate=100000")
        page.find("#add").click()
        wait.until(lambda d: not page.find("#add-dialog").is_displayed())
        film = page.api("GET", "/downloads?category=films")["downloads"]
        assert len(film) == 1 and film[0]["priority"] == 7, film
        wait.until(lambda d: (page.api("GET", f"/downloads/{film[0]['id']}")["path"] or "").startswith("media/films/"))
        wait.until(lambda d: page.cell("film.mkv", ".category") == "films")

        wait.until(lambda d: page.state("debian.iso") == "downloading" and page.percent("debian.iso") > 0)
        wait.until(lambda d: (page.cell("debian.iso", ".speed") or "").endswith("/s"))
        page.row("debian.iso").find_element(By.CSS_SELECTOR, ".pause").click()
        wait.until(lambda d: page.state("debian.iso") == "paused")
        paused_at = page.percent("debian.iso")
        time.sleep(1)
        assert page.percent("debian.iso") == paused_at < 100, "a paused download moved on"
        # A paused badge has a colour of its own.
        colours = page.js("const c = (s) => getComputedStyle(document.querySelector(`#spacer .item[data-state=${s}] .state`)).color;"
                          "return [c('paused'), c('downloading'), c('completed')];")
        assert len(set(colours)) == 3, colours
        # The same URL again: the dialog says it is in the list already, and in which state, instead of closing
        # as if something was added.
        page.find("#open-add").click()
        wait.until(lambda d: page.find("#add-dialog").is_displayed())
        # (Into the same place: the dialog still holds the films category and priority of the last add.)
        Select(page.find("#category")).select_by_value("")
        page.find("#priority").clear()
        page.find("#urls").send_keys(f"{origin_url}/files/debian.iso?rate=262144")
        page.find("#add").click()
        wait.until(lambda d: "Already in the list: debian.iso (paused)" in page.find("#add-problem").text)
        assert page.find("#add-dialog").is_displayed()
        page.find("#add-dialog .close-dialog").click()
        wait.until(lambda d: not page.find("#add-dialog").is_displayed())

        # The server goes away mid-download: the page says so, its rows are what was last known (no speed), and an
        # action says the server cannot be reached. It comes back: all clears and the download completes.
        wait.until(lambda d: page.state("film.mkv") == "downloading")
        wait.until(lambda d: (page.cell("film.mkv", ".speed") or "").endswith("/s"))
        stop(haul)
        wait.until(lambda d: page.find("#banner").is_displayed())
        assert "Cannot reach the Haul server" in page.find("#banner").text
        assert driver.execute_script("return document.body.dataset.stale") == "true"
        assert page.cell("film.mkv", ".speed") == "", "a stale row shows no speed"
        driver.save_screenshot(os.path.join(shots, "offline.png"))
        page.row("debian.iso").find_element(By.CSS_SELECTOR, ".resume").click()
        wait.until(lambda d: "cannot reach the Haul server" in (page.cell("debian.iso", ".info") or ""))
        assert "Failed to fetch" not in page.find("body").text
        restart()
        wait.until(lambda d: not page.find("#banner").is_displayed())
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        assert driver.execute_script("return document.body.dataset.stale") == "false"
        wait.until(lambda d: "cannot reach" not in (page.cell("debian.iso", ".info") or ""))
        page.row("debian.iso").find_element(By.CSS_SELECTOR, ".resume").click()
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: page.state("debian.iso") == "completed")
        with open(f"{work}/dl/debian.iso", "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(files["debian.iso"]).hexdigest()
        WebDriverWait(driver, 60, poll_frequency=0.2).until(lambda d: page.state("film.mkv") == "completed")

        # The finished file is a link without the token; a click opens it with a one-minute ticket instead, and
        # what the ticket opens is the file (fetched without any header).
        link = page.row("debian.iso").find_element(By.CSS_SELECTOR, "a.file")
        href = link.get_attribute("href")
        assert link.is_displayed() and "/downloads/" in href and href.endswith("/file"), href
        link.click()
        wait.until(lambda d: any("/file?ticket=" in url for url in page.requested()))
        digest = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            ticketed(new URL(arguments[0]).pathname).then(url => fetch(url, {credentials: 'omit'}))
              .then(r => r.arrayBuffer()).then(b => crypto.subtle.digest('SHA-256', b))
              .then(h => done([...new Uint8Array(h)].map(x => x.toString(16).padStart(2, '0')).join('')));
            """, href)
        assert digest == hashlib.sha256(files["debian.iso"]).hexdigest(), "the link serves another file"
        driver.get(base + "/")  # the link navigated away
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        wait.until(lambda d: page.state("ubuntu.iso") == "completed")

        # A failure: its whole error in the details, with the segments and the fields a change can set.
        page.api("POST", "/downloads", {"url": f"{origin_url}/files/missing-file-with-a-rather-long-name.iso"})
        wait.until(lambda d: page.state("missing-file-with-a-rather-long-name.iso") == "failed")
        page.open_detail("missing-file-with-a-rather-long-name.iso")
        assert page.detail_field("Error") == "http_404: the server answered HTTP 404", page.detail_field("Error")
        assert page.find("#detail-actions [data-action=retry]").is_displayed()
        page.open_detail("debian.iso")
        resource = [d for d in page.api("GET", "/downloads")["downloads"] if d["filename"] == "debian.iso"][0]
        assert page.detail_field("URL") == resource["url"] and page.detail_field("Path") == "debian.iso"
        assert len(driver.find_elements(By.CSS_SELECTOR, "#detail-segments .segment")) == len(resource["segments"])
        assert page.find("#detail-scheme").text == resource["url"].split(":")[0].upper()
        # Each row names the protocol its file comes over.
        page.api("POST", "/downloads", {"url": "ftp://127.0.0.1:9/pub/mirror.iso", "start_paused": True})
        wait.until(lambda d: page.state("mirror.iso") == "paused")
        assert page.row("mirror.iso").find_element(By.CSS_SELECTOR, ".scheme").text == "FTP"
        assert page.row("debian.iso").find_element(By.CSS_SELECTOR, ".scheme").text == "HTTP"
        page.find("#detail-close").click()
        wait.until(lambda d: not page.find("#detail").is_displayed())

        # Queue order and priority: three waiting downloads, one moved to the top from its menu; another changed in
        # its details (speed limit, connections, priority) reorders the queue as the server does.
        page.api("POST", "/downloads", {"downloads": [{"url": f"http://127.0.0.1:9/later-{n}.iso", "start_paused": True}
                                                       for n in range(3)]})
        Select(page.find("#sort")).select_by_value("queue")
        page.search("later-")
        wait.until(lambda d: page.names_in_order() == ["later-0.iso", "later-1.iso", "later-2.iso"])
        page.menu("later-2.iso", "top")
        wait.until(lambda d: page.names_in_order() == ["later-2.iso", "later-0.iso", "later-1.iso"])
        page.menu("later-0.iso", "down")
        wait.until(lambda d: page.names_in_order() == ["later-2.iso", "later-1.iso", "later-0.iso"])
        page.open_detail("later-0.iso")
        page.type("#detail-max-speed", "1M")
        page.type("#detail-connections", "3")
        page.type("#detail-priority", "9")
        page.find("#detail-save").click()
        wait.until(lambda d: page.names_in_order() == ["later-0.iso", "later-2.iso", "later-1.iso"])
        later0 = [d for d in page.api("GET", "/downloads?q=later-0")["downloads"]][0]
        assert (later0["max_speed"], later0["connections"], later0["priority"]) == (1 << 20, 3, 9), later0
        page.find("#detail-queue [data-move=bottom]").click()
        wait.until(lambda d: page.names_in_order() == ["later-2.iso", "later-1.iso", "later-0.iso"])
        page.find("#detail-close").click()
        page.search("")
        Select(page.find("#sort")).select_by_value("-created")

        # Categories in the sidebar with their counts; a click shows those.
        wait.until(lambda d: "films\n1" in page.find("#category-filters").text)
        page.js("[...document.querySelectorAll('#category-filters li')].find(li => li.dataset.key === 'films')"
                ".querySelector('button').click()")
        wait.until(lambda d: page.names_in_order() == ["film.mkv"])
        page.js("document.querySelector('#category-filters li[data-key=\"\"] button').click()")

        # Remove + file asks first: cancelled, nothing goes; confirmed, the file goes.
        page.menu("ubuntu.iso", "delete")
        page.confirm(ok=False)
        assert os.path.exists(f"{work}/dl/ubuntu.iso") and page.state("ubuntu.iso") == "completed"
        page.menu("ubuntu.iso", "delete")
        driver.save_screenshot(os.path.join(shots, "confirm.png"))
        page.confirm(ok=True)
        wait.until(lambda d: page.state("ubuntu.iso") is None)
        assert not os.path.exists(f"{work}/dl/ubuntu.iso"), "Remove + file left the file"
        # A selection removed asks too, and offers to delete the files.
        for n in range(3):
            page.row(f"later-{n}.iso").find_element(By.CSS_SELECTOR, ".select").click()
        wait.until(lambda d: page.find("#selection-count").text == "3 selected")
        page.find("#bulk-remove").click()
        assert page.find("#confirm-files-label").is_displayed()
        page.confirm(ok=True)
        wait.until(lambda d: all(page.state(f"later-{n}.iso") is None for n in range(3)))
        # Clear completed: the files stay unless asked.
        page.find("#clear-completed").click()
        page.confirm(ok=True, files=False)
        wait.until(lambda d: page.state("debian.iso") is None and page.state("film.mkv") is None)
        assert os.path.exists(f"{work}/dl/debian.iso"), "clearing the list deleted a file"

        # Settings: the time zone named, an empty "at most" refused, changes in force and kept.
        page.find("#open-settings").click()
        wait.until(lambda d: "Asia/Tokyo (UTC+09:00)" in page.find("#schedule-zone").text)
        page.type("#set-max-active", "2")
        page.type("#set-max-speed", "1.5M")
        page.find("#add-window").click()
        window = page.find("#schedule .window")
        window.find_element(By.CSS_SELECTOR, ".from").send_keys("00:00")
        window.find_element(By.CSS_SELECTOR, ".to").send_keys("00:00")
        page.find("#save-settings").click()
        wait.until(lambda d: "at most what?" in page.find("#settings-problem").text)
        assert page.api("GET", "/settings")["max_active"] != 2, "nothing is saved while a window is wrong"
        window.find_element(By.CSS_SELECTOR, ".speed").send_keys("500k")
        # A time that is none of the day is said to be none, in words.
        window.find_element(By.CSS_SELECTOR, ".from").clear()
        window.find_element(By.CSS_SELECTOR, ".from").send_keys("25:00")
        page.find("#save-settings").click()
        wait.until(lambda d: "25:00 is not a time of the day" in page.find("#settings-problem").text)
        window.find_element(By.CSS_SELECTOR, ".from").clear()
        window.find_element(By.CSS_SELECTOR, ".from").send_keys("00:00")
        page.find("#save-settings").click()
        wait.until(lambda d: page.find("#settings-saved").text == "Saved.")
        settings = page.api("GET", "/settings")
        assert settings["max_active"] == 2 and settings["max_speed"] == 1_572_864, settings
        assert settings["speed_schedule"] == [{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                                               "from": "00:00", "to": "00:00", "max_speed": 512_000}], settings
        wait.until(lambda d: page.find("#limit").text == "limit 500.0 KiB/s")
        # Entered values read differently from the defaults shown as hints.
        styles = page.js("const s = (id) => { const e = document.getElementById(id); const c = getComputedStyle(e);"
                         "return [c.borderColor, getComputedStyle(e, '::placeholder').fontStyle]; };"
                         "return [s('set-max-active'), s('set-connections')];")
        assert styles[0][0] != styles[1][0], f"an entered value looks like a default: {styles}"
        driver.refresh()
        wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
        page.find("#open-settings").click()
        wait.until(lambda d: page.find("#set-max-active").get_attribute("value") == "2")
        assert page.find("#set-max-speed").get_attribute("value") == "1536k"
        assert len(driver.find_elements(By.CSS_SELECTOR, "#schedule .window")) == 1
        page.find("#settings-dialog .close-dialog").click()
        page.api("PATCH", "/settings", {"max_active": None, "max_speed": None, "speed_schedule": None})

        # Webhooks: added (the secret shown once), each with its deliveries; removed.
        page.find("#open-webhooks").click()
        wait.until(lambda d: page.find("#webhook-list").text == "No webhooks.")
        page.find("#webhook-url").send_keys(f"{origin_url}/files/hook")
        Select(page.find("#webhook-category")).select_by_value("films")
        page.find("#add-webhook").click()
        wait.until(lambda d: "shown this once: whsec_" in page.find("#webhook-secret").text)
        hooks = page.api("GET", "/webhooks")["webhooks"]
        assert [(h["url"], h["category"]) for h in hooks] == [(f"{origin_url}/files/hook", "films")], hooks
        # Unknown categories are refused as a download's are (409), should a client send one.
        try:
            page.api("POST", "/webhooks", {"url": f"{origin_url}/files/hook", "category": "nosuch"})
            raise AssertionError("a webhook with an unknown category was made")
        except urllib.error.HTTPError as error:
            assert error.code == 409, error.code
        page.find("#webhooks-dialog .close-dialog").click()
        # The first film's file is still there: this one is named beside it.
        page.api("POST", "/downloads", {"url": f"{origin_url}/files/film.mkv?v=2", "category": "films"})
        wait.until(lambda d: page.state("film (1).mkv") == "completed")
        page.find("#open-webhooks").click()
        wait.until(lambda d: page.find("#webhook-list .show-deliveries").is_displayed())
        WebDriverWait(driver, 30).until(lambda d: page.api("GET", f"/webhooks/{hooks[0]['id']}/deliveries")
                                        ["deliveries"][0]["attempts"] > 0)
        page.js("document.querySelector('#webhook-list .show-deliveries').click()")
        wait.until(lambda d: "film (1).mkv" in page.find("#webhook-list .deliveries").text)
        assert "HTTP 404" in page.find("#webhook-list .deliveries").text, page.find("#webhook-list").text
        driver.save_screenshot(os.path.join(shots, "webhooks.png"))
        page.find("#webhooks-dialog .close-dialog").click()
        # The download's details list what its webhooks were sent.
        page.open_detail("film (1).mkv")
        wait.until(lambda d: "completed to " in page.find("#detail-deliveries").text)
        page.find("#detail-close").click()

        # A download that waits to try again says so, and why; then it finishes.
        page.api("POST", "/downloads", {"url": f"{origin_url}/files/busy.bin?fail=3&status=503"})
        wait.until(lambda d: "retrying in" in (page.cell("busy.bin", ".info") or ""))
        assert "http_503" in page.cell("busy.bin", ".info")
        WebDriverWait(driver, 30).until(lambda d: page.state("busy.bin") == "completed")

        # Search and sort.
        page.search("BUSY")
        wait.until(lambda d: page.names_in_order() == ["busy.bin"])
        page.search("")

        # The tour at each width: the list, the details, the menu, every dialog, a stopped server; nothing cut
        # off, nothing overlapping, the list given the height. A long-running download keeps the rows moving.
        page.api("POST", "/downloads", {"downloads": [{"url": f"http://127.0.0.1:9/waiting-{n}.iso",
                                                        "start_paused": n % 2 == 0, "priority": n % 3}
                                                       for n in range(30)]})
        slow = page.api("POST", "/downloads", {"url": f"{origin_url}/files/slow.bin?rate=16384", "category": "films"})
        for width, height in WIDTHS:
            tour(page, driver, width, height, shots, restart, lambda: stop(haul))
        page.api("DELETE", "/downloads?state=queued,probing,downloading,verifying,paused,completed,failed")

        # 10,000 downloads: the page draws the rows on screen only, scrolls to the oldest, and each view keeps
        # its own scroll position.
        driver.set_window_size(1400, 1000)
        driver.get("about:blank")
        for chunk in range(10):
            page.api("POST", "/downloads", {"downloads": [
                {"url": f"http://127.0.0.1:9/many/{chunk * 1000 + n}.bin", "start_paused": True}
                for n in range(1000)]})
        started = time.monotonic()
        driver.get(base + "/")
        wait.until(lambda d: page.find("#totals").text.startswith("10,0"))
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
        # Each view keeps its scroll position: halfway down all, to another view and back.
        page.js("document.getElementById('viewport').scrollTop = 40000;"
                "document.getElementById('viewport').dispatchEvent(new Event('scroll'));")
        time.sleep(0.3)
        Select(page.find("#filter")).select_by_value("failed") if page.find("#filter").is_displayed() else \
            page.js("document.querySelector('#state-filters li[data-key=failed] button').click()")
        wait.until(lambda d: page.js("return document.getElementById('viewport').scrollTop") == 0)
        page.js("document.querySelector('#state-filters li[data-key=\"\"] button').click()")
        wait.until(lambda d: abs(page.js("return document.getElementById('viewport').scrollTop") - 40000) < 2)
        page.search("/9999.bin")
        wait.until(lambda d: page.names_in_order() == ["9999.bin"])

        # A download the server has not answered yet: whether it resumes is not known yet.
        page.search("/9999.bin")
        page.row("9999.bin").click()
        wait.until(lambda d: page.detail_field("Resumable") == "unknown until the server answers")
        page.find("#detail-close").click()

        # Tokens, for the admin: made with a scope, a root, a quota and an expiry (the secret shown once), listed
        # with what they reach, revoked.
        page.find("#open-tokens").click()
        wait.until(lambda d: page.find("#tokens-dialog").is_displayed())
        page.type("#tok-name", "alice")
        Select(page.find("#tok-scope")).select_by_value("add")
        page.type("#tok-root", "alice")
        page.type("#tok-quota", "5G")
        page.js("document.getElementById('tok-expires').value = '2031-06-30T12:00'")
        page.find("#create-token").click()
        wait.until(lambda d: "shown this once: haul_" in page.find("#token-secret").text)
        wait.until(lambda d: "alice: add, root alice, 0 B of 5.00 GiB" in page.find("#token-list").text)
        made = [t for t in page.api("GET", "/tokens")["tokens"] if t["name"] == "alice"]
        assert made and made[0]["quota_bytes"] == 5 << 30 and made[0]["expires_at"].startswith("2031-06-30"), made
        driver.save_screenshot(os.path.join(shots, "tokens-1400.png"))
        page.find("#token-list li button").click()
        page.confirm(ok=True)
        wait.until(lambda d: "alice" not in page.find("#token-list").text)
        page.find("#tokens-dialog .close-dialog").click()
        # The settings name the token this browser uses, with ways to change or forget it.
        page.find("#open-settings").click()
        wait.until(lambda d: "the server's own token" in page.find("#token-who").text)
        page.find("#change-token").click()
        wait.until(lambda d: page.find("#token-dialog").is_displayed() and page.find("#token-cancel").is_displayed())
        page.find("#token-cancel").click()
        wait.until(lambda d: not page.find("#token-dialog").is_displayed())

        # A read-only token (a wall dashboard) sees the downloads but no button it could not use; its settings and
        # details read, and say they cannot change.
        reader = page.api("POST", "/tokens", {"name": "wall", "scope": "read"})["secret"]
        page.js("localStorage.setItem('haul.token', arguments[0]); location.reload();", reader)
        wait.until(lambda d: page.js("return document.body.dataset.scope") == "read")
        wait.until(lambda d: len(page.rows()) > 0)
        for selector in ["#open-add", "#open-webhooks", "#open-tokens", "#clear-completed", ".item .pause",
                         ".item .resume"]:
            shown = [e for e in driver.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]
            assert not shown, f"a read token is shown {selector}"
        assert page.find("#open-settings").is_displayed()
        page.find("#open-settings").click()
        wait.until(lambda d: "Read only" in page.find("#settings-note").text)
        assert not page.find("#set-max-active").is_enabled() and not page.find("#save-settings").is_displayed()
        assert "wall (read)" in page.find("#token-who").text, page.find("#token-who").text
        page.find("#settings-dialog .close-dialog").click()
        page.rows()[0].click()
        wait.until(lambda d: page.find("#detail").is_displayed())
        assert not page.find("#detail-max-speed").is_enabled(), "a read token's details are read only"
        page.find("#detail-close").click()
        # Forgetting it: the page asks for a token again.
        page.find("#open-settings").click()
        page.find("#forget-token").click()
        wait.until(lambda d: page.find("#token-dialog").is_displayed())
        assert page.js("return localStorage.getItem('haul.token')") is None
        page.js("localStorage.setItem('haul.token', arguments[0]); location.reload();", TOKEN)
        wait.until(lambda d: page.js("return document.body.dataset.scope") == "admin")
        assert page.find("#open-add").is_displayed() and page.find("#open-webhooks").is_displayed()

        # No URL the page asked for carried the token (streams and files open with tickets).
        page.requested()
        assert page.sent and any("/events?" in url and "ticket=" in url for url in page.sent), page.sent[:20]
        leaked = [url for url in page.sent if TOKEN in url or "access_token" in url]
        assert not leaked, leaked

        # Nothing the page did was refused by its own Content-Security-Policy or threw.
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
                  and "Failed to load resource" not in e["message"] and "net::ERR_CONNECTION_REFUSED" not in e["message"]]
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


def tour(page, driver, width, height, shots, restart, kill):
    """One width: each view of the dashboard, checked to fit and photographed (list-1400.png, detail-1400.png...)."""
    wait = page.wait
    driver.set_window_size(width, height)
    driver.get(page.base + "/")
    wait.until(lambda d: page.find("#connection").get_attribute("data-state") == "live")
    wait.until(lambda d: page.state("slow.bin") == "downloading")
    shot = lambda name: driver.save_screenshot(os.path.join(shots, f"{name}-{width}.png"))
    page.fits(f"the list at {width}")
    # The list gets the height: at 1000 px high a window shows well over 8 rows, and only the list scrolls.
    rows_seen = page.js("const v = document.getElementById('viewport'); return Math.floor(v.clientHeight / 44);")
    if height >= 1000:
        assert rows_seen >= 15, f"{rows_seen} rows fit at {width} x {height}"
    if width >= 1024:
        # While there is room, the speed column and a running row's pause stay.
        wait.until(lambda d: (page.cell("slow.bin", ".speed") or "").endswith("/s"))
        assert page.row("slow.bin").find_element(By.CSS_SELECTOR, ".pause").is_displayed(), \
            f"no pause on a running row at {width}"
    shot("list")
    # The queue from a row's menu: the last waiting download to the top.
    page.search("waiting-")
    page.type("#filter", "paused")
    Select(page.find("#sort")).select_by_value("queue")
    wait.until(lambda d: len(page.names_in_order()) > 3)
    last = page.names_in_order()[-1]
    page.menu(last, "top")
    page.js("document.getElementById('viewport').scrollTop = 0")
    wait.until(lambda d: page.names_in_order()[0] == last)
    page.type("#filter", "")
    page.search("")
    Select(page.find("#sort")).select_by_value("-created")
    # The row menu and the details of a running download.
    page.row("slow.bin").find_element(By.CSS_SELECTOR, ".more").click()
    wait.until(lambda d: page.find("#row-menu").is_displayed())
    page.fits(f"the menu at {width}")
    shot("menu")
    page.find("#row-menu [data-action=details]").click()
    wait.until(lambda d: page.find("#detail").is_displayed())
    wait.until(lambda d: (page.detail_field("Connections") or "").endswith("of 4"))
    page.fits(f"the details at {width}")
    shot("detail")
    page.find("#detail-close").click()
    for opener, dialog in [("#open-add", "add"), ("#open-settings", "settings"), ("#open-webhooks", "webhooks")]:
        if not page.find(opener).is_displayed():
            raise AssertionError(f"{opener} is not reachable at {width}")
        page.find(opener).click()
        wait.until(lambda d: page.find(f"#{dialog}-dialog").is_displayed())
        if dialog == "add":
            page.find("#add-dialog details summary").click()
            # With More options open, Add is still in view, and every hint can be read in its field.
            assert page.js("const r = document.getElementById('add').getBoundingClientRect();"
                           "return r.bottom <= window.innerHeight && r.top >= 0;"), f"Add out of view at {width}"
            cut = page.js("""
                const c = document.createElement('canvas').getContext('2d');
                return [...document.querySelectorAll('#add-dialog input[placeholder]')].filter((e) => {
                  const s = getComputedStyle(e, '::placeholder');
                  c.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
                  const pad = parseFloat(getComputedStyle(e).paddingLeft) + parseFloat(getComputedStyle(e).paddingRight);
                  return c.measureText(e.placeholder).width > e.clientWidth - pad + 1;
                }).map((e) => e.id);""")
            assert width > 420 or not cut, f"hints cut at {width}: {cut}"
        page.fits(f"the {dialog} dialog at {width}")
        shot(dialog)
        page.find(f"#{dialog}-dialog .close-dialog").click()
    # Categories: the sidebar on a wide window, the filter in the toolbar on a narrow one; the new-category form.
    if page.find("#sidebar").is_displayed():
        assert "films" in page.find("#category-filters").text
        page.find("#new-category").click()
    else:
        Select(page.find("#category-filter")).select_by_value("films")
        wait.until(lambda d: sorted(page.names_in_order()) == ["film (1).mkv", "slow.bin"])
        Select(page.find("#category-filter")).select_by_value("")
        page.find("#new-category-here").click()
    wait.until(lambda d: page.find("#category-dialog").is_displayed())
    page.fits(f"the category form at {width}")
    shot("category")
    page.find("#category-dialog .close-dialog").click()
    # A removal asks first.
    page.row("slow.bin").find_element(By.CSS_SELECTOR, ".select").click()
    page.find("#bulk-remove").click()
    wait.until(lambda d: page.find("#confirm-dialog").is_displayed())
    page.fits(f"the confirmation at {width}")
    shot("confirm")
    page.confirm(ok=False)
    page.find("#bulk-clear").click()
    assert page.state("slow.bin") is not None, "a cancelled removal removed"
    # The server stops mid-download: the banner, stale rows; then it is back and the rows move again.
    kill()
    wait.until(lambda d: page.find("#banner").is_displayed())
    # The rows are drawn stale on the frame after the banner shows (setOnline schedules the render).
    wait.until(lambda d: page.cell("slow.bin", ".speed") == "")
    page.fits(f"the banner at {width}")
    shot("offline")
    restart()
    wait.until(lambda d: not page.find("#banner").is_displayed())
    WebDriverWait(driver, 30).until(lambda d: (page.cell("slow.bin", ".speed") or "").endswith("/s")
                                    or page.state("slow.bin") == "completed")


if __name__ == "__main__":
    main()
