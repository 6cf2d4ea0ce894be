#!/usr/bin/env python3
"""Haul's qBittorrent Web API v2 front, driven by qbittorrent-api (PyPI) and compared with Debian's qbittorrent-nox.

Starts a BitTorrent seeder on loopback (Debian's python3-libtorrent, Tests/Servers/torrent_seeder.py), Haul with
BitTorrent on and a token, and qbittorrent-nox 4.5.2 in a profile of its own (DHT, LSD, PeX and UPnP off: it talks
to the seeder only). Then:

1. qbittorrent-api logs in to Haul with the token as the password and adds a magnet link of the seeder's torrent
   with a category and tags, paused; lists it, reads its properties and files, sets its category, tags and share
   limits, resumes it, waits for it (the file's sha256 must be the seeder's), pauses and resumes it, deletes it with
   its files (gone from disk).
2. The same raw calls go to Haul and to qbittorrent-nox, and their answers are compared: status codes, content
   types, and the JSON shapes (each object's keys, each value's type), state names among qBittorrent's. A
   difference fails the test unless README lists it.
3. Sonarr's call sequence (its QBittorrentProxyV2: webapiVersion, preferences, categories, createCategory,
   torrents/add of a .torrent file with a category, paused, topPrio, info?category=, properties, files,
   setShareLimits, resume, delete with files) replayed against Haul, checking what Sonarr reads of each answer.
4. Access: no session is 403, a wrong password `Fails.` (then the address is refused), a page of another site
   (Referer or Origin) 401, a scoped token's session sees only its own torrents, and a revoked token's session ends.

Usage: qbittorrent_test.py BUILD_DIR
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import qbittorrentapi
import requests

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "Tests", "Dashboard"))
from dashboard_test import start, stop  # noqa: E402

TOKEN = "qbittorrent-test-token-0123456789"
SEEDER = os.path.join(REPO, "Tests", "Servers", "torrent_seeder.py")

# Every state qBittorrent 4.5 names (torrents/info's `state`).
STATES = {"error", "missingFiles", "uploading", "pausedUP", "queuedUP", "stalledUP", "checkingUP", "forcedUP",
          "allocating", "downloading", "metaDL", "pausedDL", "queuedDL", "stalledDL", "checkingDL", "forcedDL",
          "checkingResumeData", "moving", "unknown"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Torrent:
    """A file of random bytes and its .torrent (Debian's mktorrent), announced to `tracker`; `seed()` starts a
    seeder of it on loopback."""

    def __init__(self, work, name, size, tracker):
        self.work, self.name = work, name
        self.folder = os.path.join(work, "seed-" + name)
        os.makedirs(self.folder)
        self.path = os.path.join(self.folder, name)
        with open(self.path, "wb") as f:
            f.write(os.urandom(size))
        self.sha256 = sha256(self.path)
        self.torrent = os.path.join(work, name + ".torrent")
        subprocess.run(["mktorrent", "-a", f"http://127.0.0.1:{tracker}/announce", "-l", "18", "-o", self.torrent,
                        self.path], check=True, stdout=subprocess.DEVNULL)
        self.hash = subprocess.run(
            ["/usr/bin/python3", "-c", "import libtorrent, sys; "
             "print(libtorrent.torrent_info(sys.argv[1]).info_hashes().v1)", self.torrent],
            check=True, capture_output=True, text=True).stdout.strip()
        self.proc = None

    def seed(self):
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SEEDER, "--torrent", self.torrent, "--data", self.folder,
             "--status", os.path.join(self.work, self.name + ".status")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        started = json.loads(self.proc.stdout.readline())
        self.port = started["port"]
        assert started["info_hash"] == self.hash, started

    @property
    def magnet(self):
        return f"magnet:?xt=urn:btih:{self.hash}&dn={self.name}&x.pe=127.0.0.1:{self.port}"

    def stop(self):
        if self.proc:
            stop(self.proc)


def start_tracker(work, port, hashes):
    """Debian's opentracker on 127.0.0.1, tracking only `hashes` (its whitelist, read inside its chroot)."""
    with open(os.path.join(work, "whitelist"), "w") as f:
        f.write("\n".join(hashes) + "\n")
    # It reads the list as nobody, after changing root to `work`.
    os.chmod(work, 0o755)
    os.chmod(os.path.join(work, "whitelist"), 0o644)
    proc = subprocess.Popen(["opentracker", "-i", "127.0.0.1", "-p", str(port), "-P", str(port), "-d", work,
                             "-w", "whitelist"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("opentracker did not listen")


def start_qbittorrent(work):
    """qbittorrent-nox 4.5.2 on a loopback port, its legal notice accepted, nothing but loopback peers."""
    profile = os.path.join(work, "qbt")
    config = os.path.join(profile, "qBittorrent", "config")
    os.makedirs(config)
    port = free_port()
    with open(os.path.join(config, "qBittorrent.conf"), "w") as f:
        f.write(f"""[LegalNotice]
Accepted=true

[BitTorrent]
Session\\DHTEnabled=false
Session\\LSDEnabled=false
Session\\PeXEnabled=false
Session\\Port={free_port()}
Session\\Interface=lo
Session\\InterfaceName=lo

[Preferences]
Connection\\UPnP=false
WebUI\\Address=127.0.0.1
WebUI\\Port={port}
WebUI\\LocalHostAuth=true
""")
    log = open(os.path.join(work, "qbittorrent.log"), "w")
    proc = subprocess.Popen(["qbittorrent-nox", f"--profile={profile}", f"--webui-port={port}"],
                            stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            requests.get(base + "/api/v2/app/version", timeout=1)
            return proc, base
        except requests.ConnectionError:
            time.sleep(0.2)
    raise RuntimeError("qbittorrent-nox did not start")


def logged_in(base, password, username="admin"):
    session = requests.Session()
    answer = session.post(base + "/api/v2/auth/login", data={"username": username, "password": password}, timeout=10)
    assert answer.text == "Ok.", (base, answer.status_code, answer.text)
    assert "SID" in session.cookies, answer.headers
    return session


def shape(value):
    """A JSON value's shape: objects by key, arrays by their first item, numbers as one type."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "string"


def wait(what, predicate, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def one(session, base, hash):
    items = session.get(base + "/api/v2/torrents/info", params={"hashes": hash}, timeout=10).json()
    return items[0] if items else None


# What README lists as answered differently on purpose (the test fails on any other difference).
KNOWN = {
    # Haul holds no free-form global tags beyond the downloads' own and those made since it started; qBittorrent's
    # preferences hold ~170 keys, Haul answers those that apply to it (each with qBittorrent's type).
    "app/preferences",
}


def compare(haul, qbit, haul_torrent, qbit_torrent):
    """The same calls to both; answers compared by status, content type and shape."""
    failures = []
    calls = [
        ("GET", "app/version", {}), ("GET", "app/webapiVersion", {}), ("GET", "app/defaultSavePath", {}),
        ("GET", "app/buildInfo", {}),
        ("GET", "torrents/info", {}), ("GET", "torrents/info", {"filter": "completed", "sort": "name"}),
        ("GET", "torrents/info", {"category": ""}), ("GET", "torrents/info", {"tag": "nosuch"}),
        ("GET", "torrents/properties", {"hash": "{hash}"}), ("GET", "torrents/files", {"hash": "{hash}"}),
        ("GET", "torrents/trackers", {"hash": "{hash}"}),
        ("GET", "torrents/properties", {"hash": "0" * 40}), ("GET", "torrents/properties", {}),
        ("GET", "torrents/categories", {}), ("GET", "torrents/tags", {}), ("GET", "transfer/info", {}),
        ("GET", "sync/maindata", {"rid": "0"}),
        ("GET", "torrents/pause", {"hashes": "{hash}"}), ("GET", "torrents/nosuch", {}),
        ("POST", "torrents/setCategory", {"hashes": "{hash}", "category": "nosuch"}),
        ("POST", "torrents/createCategory", {"category": "shows", "savePath": ""}),
        ("POST", "torrents/createCategory", {"category": "shows", "savePath": ""}),
        ("POST", "torrents/editCategory", {"category": "nosuch", "savePath": ""}),
        ("POST", "torrents/setShareLimits", {"hashes": "{hash}"}),
        ("POST", "torrents/setShareLimits", {"hashes": "{hash}", "ratioLimit": "2", "seedingTimeLimit": "60"}),
        ("POST", "torrents/addTags", {"hashes": "{hash}", "tags": "x,y"}),
        ("POST", "torrents/removeTags", {"hashes": "{hash}", "tags": "x"}),
        ("POST", "torrents/topPrio", {"hashes": "{hash}"}),
        ("POST", "torrents/add", {"urls": "not a link"}),
        ("POST", "torrents/delete", {"hashes": "0" * 40, "deleteFiles": "false"}),
        ("POST", "torrents/removeCategories", {"categories": "shows"}),
    ]
    for method, path, params in calls:
        answers = []
        for session, base, hash in ((haul[0], haul[1], haul_torrent), (qbit[0], qbit[1], qbit_torrent)):
            given = {key: value.replace("{hash}", hash) for key, value in params.items()}
            url = f"{base}/api/v2/{path}"
            answer = session.get(url, params=given, timeout=10) if method == "GET" else \
                session.post(url, data=given, timeout=10)
            kind = answer.headers.get("Content-Type", "").split(";")[0]
            body = answer.json() if kind == "application/json" else None
            answers.append((answer.status_code, kind, shape(body), body, answer.text))
        (hs, hk, hshape, hbody, htext), (qs, qk, qshape, qbody, qtext) = answers
        label = f"{method} {path} {params}"
        if hs != qs:
            failures.append(f"{label}: status {hs} (Haul: {htext!r}) != {qs} (qBittorrent: {qtext!r})")
        if hk != qk:
            failures.append(f"{label}: content type {hk} != {qk}")
        if path in KNOWN or hk != "application/json" or qk != "application/json":
            continue
        if path == "sync/maindata":
            # Each torrent's and server_state's keys; categories differ in content (their folders), not shape.
            for key in ("full_update", "rid", "server_state", "tags", "torrents", "trackers", "categories"):
                if key not in hbody:
                    failures.append(f"{label}: Haul has no {key}")
            if sorted(hbody["server_state"]) != sorted(qbody["server_state"]):
                failures.append(f"{label}: server_state keys differ: "
                                f"{set(hbody['server_state']) ^ set(qbody['server_state'])}")
            h = next(iter(hbody["torrents"].values()), None)
            q = next(iter(qbody["torrents"].values()), None)
            if h and q and shape(h) != shape(q):
                failures.append(f"{label}: torrent shapes differ: {diff(shape(h), shape(q))}")
            continue
        if path == "torrents/categories":
            hshape, qshape = [shape(v) for v in hbody.values()][:1], [shape(v) for v in qbody.values()][:1]
        if hshape and qshape and hshape != qshape:
            failures.append(f"{label}: shapes differ: {diff(hshape, qshape)}")
        for item in (hbody if isinstance(hbody, list) else []):
            if isinstance(item, dict) and "state" in item and item["state"] not in STATES:
                failures.append(f"{label}: state {item['state']} is not one of qBittorrent's")
    # Preferences: Haul's keys are qBittorrent's, with qBittorrent's types.
    hp = haul[0].get(haul[1] + "/api/v2/app/preferences", timeout=10).json()
    qp = qbit[0].get(qbit[1] + "/api/v2/app/preferences", timeout=10).json()
    for key, value in hp.items():
        if key not in qp:
            failures.append(f"app/preferences: {key} is not qBittorrent's")
        elif shape(value) != shape(qp[key]):
            failures.append(f"app/preferences: {key} is {shape(value)}, qBittorrent's {shape(qp[key])}")
    for key in ("save_path", "max_ratio_enabled", "max_ratio", "max_seeding_time_enabled", "max_seeding_time",
                "max_ratio_act", "queueing_enabled", "dht", "max_active_downloads", "dl_limit", "up_limit"):
        if key not in hp:
            failures.append(f"app/preferences: Haul has no {key}, which clients read")
    return failures


def diff(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return {"only Haul": sorted(set(a) - set(b)), "only qBittorrent": sorted(set(b) - set(a)),
                "types": {k: (a[k], b[k]) for k in set(a) & set(b) if a[k] != b[k]}}
    if isinstance(a, list) and isinstance(b, list) and a and b:
        return diff(a[0], b[0])
    return (a, b)


def drive_with_qbittorrent_api(base, work, movie):
    """The library a script would use, end to end."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    client = qbittorrentapi.Client(host=host, port=int(port), username="admin", password=TOKEN,
                                   REQUESTS_ARGS={"timeout": 10})
    client.auth_log_in()
    assert client.app.version == "v4.5.2", client.app.version
    assert client.app.web_api_version == "2.8.19"
    client.torrents_create_category(name="films", save_path="")
    assert "films" in client.torrents_categories(), client.torrents_categories()
    assert client.torrents_add(urls=movie.magnet, category="films", tags=["hd", "new"], is_paused=True) == "Ok."
    torrent = wait("the added torrent", lambda: client.torrents_info(torrent_hashes=movie.hash))[0]
    assert torrent.hash == movie.hash and torrent.category == "films", torrent
    assert torrent.state in ("pausedDL", "metaDL"), torrent.state
    assert torrent.tags == "hd, new", torrent.tags
    assert client.torrents_info(category="films")[0].hash == movie.hash
    assert client.torrents_info(tag="hd")[0].hash == movie.hash
    assert client.torrents_info(category="other") == []
    assert client.torrents_info(status_filter="paused")[0].hash == movie.hash
    client.torrents_add_tags(tags="keep", torrent_hashes=movie.hash)
    client.torrents_remove_tags(tags="new", torrent_hashes=movie.hash)
    assert client.torrents_info(torrent_hashes=movie.hash)[0].tags == "hd, keep"
    assert set(client.torrents_tags()) >= {"hd", "keep"}
    client.torrents_set_share_limits(ratio_limit=1.5, seeding_time_limit=30, torrent_hashes=movie.hash)
    torrent = client.torrents_info(torrent_hashes=movie.hash)[0]
    assert (torrent.ratio_limit, torrent.seeding_time_limit) == (1.5, 30), torrent
    assert (torrent.max_ratio, torrent.max_seeding_time) == (1.5, 30), torrent
    client.torrents_set_share_limits(ratio_limit=0, seeding_time_limit=0, torrent_hashes=movie.hash)
    # Only a running torrent is checked again: a paused one is checked when it resumes.
    try:
        client.torrents_recheck(torrent_hashes=movie.hash)
        raise AssertionError("a paused torrent's recheck was answered as done")
    except qbittorrentapi.Conflict409Error:
        pass
    client.torrents_resume(torrent_hashes=movie.hash)
    torrent = wait("the movie to complete", lambda: next(
        (t for t in client.torrents_info(torrent_hashes=movie.hash) if t.progress == 1), None))
    assert torrent.state in ("pausedUP", "stalledUP", "uploading"), torrent.state
    assert sha256(torrent.content_path) == movie.sha256, torrent.content_path
    properties = client.torrents_properties(torrent_hash=movie.hash)
    assert properties.total_size == os.path.getsize(movie.path) and properties.pieces_num > 0, properties
    assert properties.piece_size == 1 << 18, properties.piece_size
    files = client.torrents_files(torrent_hash=movie.hash)
    assert [(f.name, f.size, f.progress) for f in files] == [(movie.name, os.path.getsize(movie.path), 1)], files
    data = client.sync_maindata(rid=0)
    assert data.full_update and movie.hash in data.torrents, data
    again = client.sync_maindata(rid=data.rid)
    assert "full_update" not in again and again.rid == data.rid + 1, again
    assert movie.hash not in again.get("torrents", {}) or "name" not in again.torrents[movie.hash], again
    client.torrents_set_category(category="", torrent_hashes=movie.hash)
    assert client.torrents_info(torrent_hashes=movie.hash)[0].category == ""
    # The server's share limits, as qBittorrent's preferences: both off is seeding without end.
    client.app_set_preferences({"max_ratio_enabled": True, "max_ratio": 2.5, "max_seeding_time_enabled": False})
    preferences = client.app_preferences()
    assert (preferences.max_ratio_enabled, preferences.max_ratio) == (True, 2.5), preferences
    settings = requests.get(f"http://{host}:{port}/settings", headers={"Authorization": f"Bearer {TOKEN}"},
                            timeout=10).json()
    assert (settings["seed_ratio"], settings["seed_time"]) == (2.5, 0), settings
    client.app_set_preferences({"max_ratio_enabled": True, "max_ratio": 0})
    assert requests.get(f"http://{host}:{port}/settings", headers={"Authorization": f"Bearer {TOKEN}"},
                        timeout=10).json()["seed_ratio"] == 0
    transfer = client.transfer_info()
    assert transfer.dl_info_data >= os.path.getsize(movie.path), transfer
    client.torrents_delete(delete_files=True, torrent_hashes=movie.hash)
    wait("the movie to go", lambda: client.torrents_info(torrent_hashes=movie.hash) == [])
    wait("the movie's file to go", lambda: not os.path.exists(torrent.content_path))
    gone = client.sync_maindata(rid=again.rid)
    assert movie.hash in gone.get("torrents_removed", []), gone
    client.auth_log_out()


def replay_sonarr(base, episode):
    """What Sonarr's qBittorrent client calls, in its order, reading what it reads."""
    session = logged_in(base, TOKEN)
    api = base + "/api/v2"
    version = session.get(api + "/app/webapiVersion", timeout=10)
    assert version.status_code == 200 and tuple(map(int, version.text.split("."))) >= (2, 0), version.text
    preferences = session.get(api + "/app/preferences", timeout=10).json()
    # Sonarr warns when completed torrents would be removed (max_ratio_act 1 or 3): Haul stops, it removes nothing.
    assert preferences["max_ratio_act"] == 0 and preferences["queueing_enabled"] is True, preferences
    categories = session.get(api + "/torrents/categories", timeout=10).json()
    assert "tv-sonarr" not in categories
    made = session.post(api + "/torrents/createCategory", data={"category": "tv-sonarr", "savePath": ""}, timeout=10)
    assert made.status_code == 200, made.text
    with open(episode.torrent, "rb") as f:
        added = session.post(api + "/torrents/add", files={"torrents": (episode.name + ".torrent", f.read())},
                             data={"category": "tv-sonarr", "paused": "true", "sequentialDownload": "false",
                                   "firstLastPiecePrio": "false"}, timeout=10)
    assert (added.status_code, added.text) == (200, "Ok."), added.text
    assert session.post(api + "/torrents/topPrio", data={"hashes": episode.hash}, timeout=10).status_code == 200
    items = session.get(api + "/torrents/info", params={"category": "tv-sonarr"}, timeout=10).json()
    assert [item["hash"] for item in items] == [episode.hash], items
    item = items[0]
    for key in ("name", "size", "progress", "eta", "state", "category", "save_path", "content_path", "ratio",
                "ratio_limit", "seeding_time", "seeding_time_limit", "dlspeed", "upspeed", "amount_left"):
        assert key in item, key
    assert item["state"] == "pausedDL" and item["save_path"].endswith("/tv-sonarr"), item
    properties = session.get(api + "/torrents/properties", params={"hash": episode.hash}, timeout=10).json()
    assert properties["save_path"] == item["save_path"], properties
    files = session.get(api + "/torrents/files", params={"hash": episode.hash}, timeout=10).json()
    assert [f["name"] for f in files] == [episode.name], files
    limits = session.post(api + "/torrents/setShareLimits",
                          data={"hashes": episode.hash, "ratioLimit": "-2", "seedingTimeLimit": "-2"}, timeout=10)
    assert limits.status_code == 200, limits.text
    assert session.post(api + "/torrents/resume", data={"hashes": episode.hash}, timeout=10).status_code == 200
    item = wait("the episode to complete", lambda: next(
        (i for i in session.get(api + "/torrents/info", params={"category": "tv-sonarr"}, timeout=10).json()
         if i["progress"] == 1 and i["state"] == "pausedUP"), None))
    # What Sonarr imports from: the content path, exact; and with no seeding asked for, the limit is reached.
    assert sha256(item["content_path"]) == episode.sha256, item
    assert item["max_ratio"] == 0 and item["ratio_limit"] == -2, item
    deleted = session.post(api + "/torrents/delete", data={"hashes": episode.hash, "deleteFiles": "true"}, timeout=10)
    assert deleted.status_code == 200, deleted.text
    wait("the episode's file to go", lambda: not os.path.exists(item["content_path"]))


def check_access(base, build, data):
    api = base + "/api/v2"
    assert requests.get(api + "/torrents/info", timeout=10).status_code == 403
    assert requests.post(api + "/torrents/pause", data={"hashes": "all"}, timeout=10).status_code == 403
    session = logged_in(base, TOKEN)
    # A page of another site: 401, as qBittorrent's CSRF check answers; the *arr apps send no Referer at all.
    foreign = session.get(api + "/app/version", headers={"Referer": "http://evil.example/"}, timeout=10)
    assert foreign.status_code == 401, foreign.status_code
    foreign = session.get(api + "/app/version", headers={"Origin": "http://evil.example"}, timeout=10)
    assert foreign.status_code == 401, foreign.status_code
    foreign = session.post(api + "/torrents/pause", data={"hashes": "all"}, headers={"Origin": "http://evil.example"},
                           timeout=10)
    assert (foreign.status_code, foreign.text) == (401, "Unauthorized"), foreign.text
    own = session.get(api + "/app/version", headers={"Referer": base + "/"}, timeout=10)
    assert own.status_code == 200, own.status_code
    # A scoped token logs in with its own secret, sees its own torrents only, and its session ends when it is
    # revoked.
    made = requests.post(base + "/tokens", json={"name": "sonarr", "scope": "add", "root": "sonarr"},
                         headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert made.status_code == 201, made.text
    scoped = logged_in(base, made.json()["secret"])
    assert scoped.get(api + "/torrents/info", timeout=10).json() == []
    assert scoped.get(api + "/app/defaultSavePath", timeout=10).text.endswith("/downloads/sonarr")
    refused = scoped.post(api + "/torrents/createCategory", data={"category": "mine"}, timeout=10)
    assert refused.status_code == 403, refused.text
    requests.delete(base + "/tokens/" + made.json()["id"], headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert scoped.get(api + "/torrents/info", timeout=10).status_code == 403
    # Wrong passwords: `Fails.`, then the address is refused for a while, as qBittorrent bans it.
    answers = [requests.post(api + "/auth/login", data={"username": "admin", "password": "wrong"}, timeout=10)
               for _ in range(12)]
    assert answers[0].text == "Fails." and answers[-1].status_code == 403, [a.text for a in answers]


def main():
    build = sys.argv[1]
    work = tempfile.mkdtemp(prefix="haul-qbittorrent-")
    processes, seeders = [], []
    try:
        tracker = free_port()
        movie = Torrent(work, "movie.mkv", 6 << 20, tracker)
        episode = Torrent(work, "episode.mkv", 3 << 20, tracker)
        compared = Torrent(work, "compared.bin", 1 << 20, tracker)
        processes.append(start_tracker(work, tracker, [movie.hash, episode.hash, compared.hash]))
        seeders += [movie, episode, compared]
        for seeder in seeders:
            seeder.seed()
        log = open(os.path.join(work, "haul.log"), "w")
        data = os.path.join(work, "data")
        qbittorrent_port = free_port()
        haul, base = start([os.path.join(build, "haul"), "serve", "--listen", "127.0.0.1:0",
                            "--qbittorrent-listen", f"127.0.0.1:{qbittorrent_port}",
                            "--download-dir", os.path.join(work, "downloads"), "--data-dir", data,
                            "--bittorrent", "--bittorrent-listen", "127.0.0.1:0", "--token", TOKEN,
                            "--log-level", "warning"], log)
        processes.append(haul)
        qbit, qbase = start_qbittorrent(work)
        processes.append(qbit)

        # On the port of its own, as a client configured for qBittorrent's port reaches it.
        drive_with_qbittorrent_api(f"http://127.0.0.1:{qbittorrent_port}", work, movie)
        print("qbittorrent-api drove Haul: add, list, properties, files, category, tags, limits, delete")
        replay_sonarr(base, episode)
        print("Sonarr's call sequence answered as Sonarr reads it")

        # The same torrent in both, complete, then the same calls to both.
        sessions = []
        for target, password in ((base, TOKEN), (qbase, "adminadmin")):
            session = logged_in(target, password)
            answer = session.post(target + "/api/v2/torrents/add",
                                  data={"urls": compared.magnet, "category": "", "tags": "a,b"}, timeout=10)
            assert answer.text == "Ok.", (target, answer.text)
            wait(f"{target} to complete the compared torrent",
                 lambda s=session, t=target: (one(s, t, compared.hash) or {}).get("progress") == 1)
            sessions.append((session, target))
        failures = compare(sessions[0], sessions[1], compared.hash, compared.hash)
        if failures:
            raise AssertionError("Haul's answers differ from qbittorrent-nox 4.5.2's:\n  " + "\n  ".join(failures))
        print("Haul's answers have qbittorrent-nox 4.5.2's statuses, content types and shapes")

        check_access(base, build, data)
        print("access: sessions, CSRF, scoped tokens, revocation, wrong passwords")
    finally:
        for proc in processes:
            stop(proc)
        for seeder in seeders:
            seeder.stop()
        if os.environ.get("KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept", work)


if __name__ == "__main__":
    main()
