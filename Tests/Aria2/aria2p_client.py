"""aria2p (from PyPI), the Python client of aria2's JSON-RPC, driving a Haul server as it would drive aria2c.

Usage: aria2p_client.py PORT SECRET FILE_URL SLOW_URL
Adds FILE_URL and waits for it through aria2p's notifications (the WebSocket), then pauses, resumes and removes
SLOW_URL, purges, and prints one JSON line of what it saw for the Swift test to check (file paths, statuses,
notifications). Any exception fails the run with a traceback.
"""
import json
import sys
import threading
import time

import aria2p

port, secret, file_url, slow_url = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# With a token, Haul tells aria2's notifications only to sockets that proved it (aria2c tells every socket): aria2p's
# listener only listens, so its socket gives the token in its URL, which Haul takes at the handshake.
aria2p.Client.ws_server = property(lambda self: f"ws{self.host[4:]}:{self.port}/jsonrpc?token={self.secret}")
api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=int(port), secret=secret, timeout=10))
seen = []
completed = threading.Event()


def record(kind):
    def callback(api_, gid):
        seen.append([kind, gid])
        if kind == "complete":
            completed.set()
    return callback


api.listen_to_notifications(threaded=True, timeout=1,
                            on_download_start=record("start"), on_download_pause=record("pause"),
                            on_download_stop=record("stop"), on_download_complete=record("complete"),
                            on_download_error=record("error"))
time.sleep(0.5)
report = {"version": api.client.get_version()["version"]}

first = api.add_uris([file_url], options={"split": "4", "max-connection-per-server": "4", "out": "by-aria2p.bin"})
if not completed.wait(60):
    raise SystemExit(f"no onDownloadComplete; saw {seen}")
first.update()
report["first"] = {"gid": first.gid, "status": first.status, "path": str(first.files[0].path),
                   "total": first.total_length, "completed": first.completed_length, "name": first.name}

slow = api.add_uris([slow_url], options={"max-download-limit": "64K"})
deadline = time.time() + 20
while api.get_download(slow.gid).status != "active" and time.time() < deadline:
    time.sleep(0.1)
report["slow_started"] = api.get_download(slow.gid).status
api.pause([slow])
deadline = time.time() + 20
while api.get_download(slow.gid).status != "paused" and time.time() < deadline:
    time.sleep(0.1)
report["slow_paused"] = api.get_download(slow.gid).status
api.resume([slow])
time.sleep(0.5)
report["slow_resumed"] = api.get_download(slow.gid).status
api.remove([slow])
try:
    report["slow_removed"] = api.get_download(slow.gid).status
except aria2p.ClientException as error:
    # aria2p's remove cleans the result up too (removeDownloadResult): gone, as from aria2c.
    report["slow_removed"] = "gone: " + str(error)
report["listed"] = sorted(d.gid for d in api.get_downloads())
report["stats"] = {"active": api.get_stats().num_active, "stopped": api.get_stats().num_stopped_total}
api.purge()
report["after_purge"] = sorted(d.gid for d in api.get_downloads())
time.sleep(1.5)
api.stop_listening()
report["seen"] = seen
report["slow_gid"] = slow.gid
print(json.dumps(report))
