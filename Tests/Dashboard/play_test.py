#!/usr/bin/env python3
"""Play while it downloads, in a real headless Chromium: a video made by Debian's ffmpeg is served slowly by
TestOrigin (two connections of 40 kB/s, three times the video's rate: about twenty seconds for the file), added to a `haul serve` with a token,
and played from the dashboard's details while it downloads; then an HLS playlist of fMP4 segments, played as its
segments arrive. The video's time advances, a seek to 80% plays (the
player's ranges are fetched first), and both happen before the download completes. ffprobe and ffmpeg read the
file route mid-download too (ffmpeg -ss to 60 s, one frame), and `haul cat` gives the source's sha256.

Usage: play_test.py BUILD_DIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from selenium.common.exceptions import StaleElementReferenceException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard_test import browser, start, stop  # noqa: E402

TOKEN = "play-test-token-0123456789abcdef"


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="haul-play-")
    os.makedirs(f"{work}/www")
    film = f"{work}/www/film.webm"
    # Two minutes of VP8 at 100 kbit/s with a keyframe every second, so a seek lands near where it was asked.
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=120:size=160x120:rate=25",
                    "-c:v", "libvpx", "-b:v", "100k", "-g", "25", "-f", "webm", film], check=True)
    with open(film, "rb") as f:
        source = f.read()
    log = open(f"{work}/servers.log", "w")
    origin, origin_url = start([f"{build}/TestOrigin", "--root", f"{work}/www"], log)
    haul, base = start([f"{build}/haul", "serve", "--download-dir", f"{work}/dl", "--data-dir", f"{work}/data",
                        "--min-free-space", "16M", "--token", TOKEN, "--min-split-size", "256K",
                        "--listen", "127.0.0.1:0"], log)

    def api(method, path, body=None):
        request = urllib.request.Request(base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"Bearer {TOKEN}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as reply:
            data = reply.read()
            return json.loads(data) if data else None

    driver = None
    ok = False
    try:
        driver = browser()
        wait = WebDriverWait(driver, 60, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
        driver.get(base + "/")
        driver.execute_script("localStorage.setItem('haul.token', arguments[0]); location.reload();", TOKEN)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#connection").get_attribute("data-state") == "live")

        added = api("POST", "/downloads", {"url": f"{origin_url}/files/film.webm?rate=40000", "connections": 2})
        did = added["id"]
        # ffprobe and ffmpeg read the file route while it downloads (a ticket-free URL: the token as a header).
        header = f"Authorization: Bearer {TOKEN}\r\n"
        url = f"{base}/downloads/{did}/file"
        probe = subprocess.run(["ffprobe", "-v", "error", "-headers", header, "-show_entries", "format=duration",
                                "-of", "csv=p=0", url], capture_output=True, text=True, timeout=60)
        assert probe.returncode == 0 and float(probe.stdout.strip()) > 119, probe.stdout + probe.stderr
        frame = f"{work}/frame.png"
        grab = subprocess.run(["ffmpeg", "-v", "error", "-headers", header, "-ss", "60", "-i", url,
                               "-frames:v", "1", "-y", frame], capture_output=True, text=True, timeout=60)
        assert grab.returncode == 0 and os.path.getsize(frame) > 0, grab.stderr
        state = api("GET", f"/downloads/{did}")["state"]
        assert state == "downloading", f"ffprobe and ffmpeg were answered mid-download, but it is {state}"

        def row(name):
            def found(_):
                for item in driver.find_elements(By.CSS_SELECTOR, "#spacer .item"):
                    if item.get_attribute("data-name") == name:
                        return item
                return False
            return found
        wait.until(row("film.webm")).find_element(By.CSS_SELECTOR, ".col-state").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#detail-play").is_displayed())
        driver.find_element(By.CSS_SELECTOR, "#detail-play").click()
        video = "document.getElementById('detail-video')"
        wait.until(lambda d: d.execute_script(f"return {video}.currentTime") > 1.0)
        assert api("GET", f"/downloads/{did}")["state"] == "downloading", "played before it completed"
        duration = driver.execute_script(f"return {video}.duration")
        assert 119 < duration < 121, duration
        driver.execute_script(f"{video}.currentTime = {video}.duration * 0.8")
        wait.until(lambda d: d.execute_script(f"return {video}.currentTime") > duration * 0.8 + 1.0
                   and not d.execute_script(f"return {video}.paused"))
        resource = api("GET", f"/downloads/{did}")
        assert resource["state"] == "downloading", f"the seek played before it completed: {resource['state']}"
        print(f"play: played at 80% with {resource['received_bytes']} of {len(source)} bytes on disk "
              f"({resource['available']})")

        # The whole file through haul cat, as it arrives.
        cat = subprocess.run(f"'{build}/haul' cat {did} --server {base} --token {TOKEN} | sha256sum",
                             shell=True, capture_output=True, text=True, timeout=120)
        assert cat.stdout.split()[0] == hashlib.sha256(source).hexdigest(), cat.stdout + cat.stderr

        # An HLS playlist of fMP4 segments (ffmpeg's), each served at 60 kB/s: joined into one .mp4 that the
        # details play while its segments arrive, in order.
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=60:size=160x120:rate=25",
                        "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "300k", "-f", "hls",
                        "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
                        "-hls_segment_filename", f"{work}/www/show%03d.m4s", f"{work}/www/show.m3u8"], check=True)
        with open(f"{work}/www/show.m3u8") as f:
            playlist = f.read().replace('URI="init.mp4"', 'URI="init.mp4?rate=60000"')
        with open(f"{work}/www/show.m3u8", "w") as f:
            f.write("\n".join(line if line.startswith("#") or not line else line + "?rate=60000"
                              for line in playlist.splitlines()) + "\n")
        show = api("POST", "/downloads", {"url": f"{origin_url}/files/show.m3u8", "connections": 2})
        wait.until(row("show.mp4")).find_element(By.CSS_SELECTOR, ".col-state").click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#detail-play").is_displayed())
        driver.find_element(By.CSS_SELECTOR, "#detail-play").click()
        wait.until(lambda d: d.execute_script(f"return {video}.currentTime") > 1.0)
        resource = api("GET", f"/downloads/{show['id']}")
        assert resource["state"] == "downloading", f"the playlist played only once {resource['state']}"
        assert resource["kind"] == "hls" and resource["hls"]["container"] == "mp4", resource
        print(f"play: an HLS playlist played with {resource['hls']['segments_done']} of "
              f"{resource['hls']['segments_total']} segments on disk")
        ok = True
    finally:
        if driver is not None:
            driver.quit()
        stop(haul)
        stop(origin)
        log.close()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(open(f"{work}/servers.log").read()[-6000:], file=sys.stderr)
    print("play: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
