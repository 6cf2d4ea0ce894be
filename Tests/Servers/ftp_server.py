#!/usr/bin/env python3
"""An FTP server for the tests (pyftpdlib from PyPI), on loopback, with the faults a test asks for.

Serves ROOT to USER:PASSWORD on 127.0.0.1:PORT and logs every command and transfer to stderr (a test reads the log
to see what Haul asked for: REST offsets, RETRs, sessions). With --tls CERT (a PEM holding the key and the
certificate) it is explicit FTPS (AUTH TLS, required for the login and the data). Faults: --without SIZE,REST,EPSV
(commands it does not know), --max-per-ip N (a 421 beyond N sessions from one address), --pasv-address A (every
PASV reply names A instead of the server's address), --slow BYTES_PER_SECOND (each data connection),
--size-says N (SIZE answers N for every file, whatever its length: a server whose size and data disagree).

Usage: ftp_server.py --port PORT --root ROOT [--user U --password P] [options]
"""
import argparse
import logging
import sys

from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler, ThrottledDTPHandler
from pyftpdlib.log import config_logging
from pyftpdlib.servers import FTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--user", default="user")
    parser.add_argument("--password", default="secret")
    parser.add_argument("--tls")
    parser.add_argument("--without", default="")
    parser.add_argument("--max-per-ip", type=int, default=0)
    parser.add_argument("--pasv-address")
    parser.add_argument("--slow", type=int, default=0)
    parser.add_argument("--size-says", type=int)
    args = parser.parse_args()

    authorizer = DummyAuthorizer()
    authorizer.add_user(args.user, args.password, args.root, perm="elr")
    if args.tls:
        from pyftpdlib.handlers import TLS_FTPHandler
        base = TLS_FTPHandler
    else:
        base = FTPHandler
    without = {name.strip().upper() for name in args.without.split(",") if name.strip()}

    class Handler(base):
        proto_cmds = {name: spec for name, spec in base.proto_cmds.items() if name not in without}

        def ftp_SIZE(self, path):
            if args.size_says is None:
                return super().ftp_SIZE(path)
            self.respond(f"213 {args.size_says}")
            return path

    Handler.authorizer = authorizer
    Handler.banner = "haul test ftp ready"
    Handler.passive_ports = None
    if args.tls:
        Handler.certfile = args.tls
        Handler.tls_control_required = True
        Handler.tls_data_required = True
    if args.pasv_address:
        Handler.masquerade_address = args.pasv_address
    if args.slow:
        dtp = ThrottledDTPHandler
        dtp.read_limit = args.slow
        dtp.write_limit = args.slow
        Handler.dtp_handler = dtp
    # Every command and reply in the log (`<- REST 1000`): what the tests read.
    config_logging(level=logging.DEBUG)
    server = FTPServer(("127.0.0.1", args.port), Handler)
    server.max_cons = 256
    server.max_cons_per_ip = args.max_per_ip
    print(f"listening on ftp://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
