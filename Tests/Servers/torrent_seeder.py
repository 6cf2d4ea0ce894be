#!/usr/bin/python3
"""A BitTorrent seeder on loopback for the tests: a libtorrent session (Debian's python3-libtorrent) seeding one
torrent from a folder, with no DHT, no local peer discovery, no UPnP or NAT-PMP. Prints {"port": N} once it
listens, then writes {"uploaded": bytes, "peers": n, "done": bytes, "finished": bool} to --status every 0.1 s,
until stdin closes or SIGTERM. With --leech it starts with nothing and downloads into the folder from --peer."""

import argparse
import json
import os
import signal
import sys
import threading
import time

import libtorrent as lt


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--torrent", required=True)
    parser.add_argument("--data", required=True, help="the folder holding the torrent's content")
    parser.add_argument("--status", required=True)
    parser.add_argument("--upload-limit", type=int, default=0, help="bytes per second, 0 for none")
    parser.add_argument("--interface", default="127.0.0.1")
    parser.add_argument("--leech", action="store_true", help="download the torrent instead of seeding it")
    parser.add_argument("--peer", help="ip:port to connect to at once")
    args = parser.parse_args()

    settings = {
        "listen_interfaces": f"{args.interface}:0",
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "upload_rate_limit": args.upload_limit,
        "alert_mask": 0,
    }
    session = lt.session(settings)
    info = lt.torrent_info(args.torrent)
    params = lt.add_torrent_params()
    params.ti = info
    params.save_path = args.data
    if not args.leech:
        params.flags = lt.torrent_flags.seed_mode
    handle = session.add_torrent(params)
    if args.peer:
        host, port = args.peer.rsplit(":", 1)
        handle.connect_peer((host, int(port)))
    # The session's limit leaves out peers on the local network (loopback among them); the torrent's own does not.
    if args.upload_limit:
        handle.set_upload_limit(args.upload_limit)

    deadline = time.time() + 10
    while session.listen_port() == 0 and time.time() < deadline:
        time.sleep(0.05)
    print(json.dumps({"port": session.listen_port(), "info_hash": str(info.info_hashes().v1)}), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.is_set():
        status = handle.status()
        temporary = args.status + ".tmp"
        with open(temporary, "w") as out:
            json.dump(
                {
                    "uploaded": status.all_time_upload,
                    "peers": status.num_peers,
                    "done": status.total_wanted_done,
                    "finished": status.is_finished,
                },
                out,
            )
        os.replace(temporary, args.status)
        stop.wait(0.1)


if __name__ == "__main__":
    main()
