import HaulCore
import HaulLoop

/// BitTorrent's rows: off unless `--bittorrent`, then where the session listens, which discovery it joins (none
/// unless enabled) and how it encrypts and uploads.
extension ServerOptions {
    static let bittorrent: [ServerOption] = [
        toggle(
            "bittorrent",
            help: "fetch magnet links and .torrent files with libtorrent; the server's address is then published "
                + "to each torrent's swarm (its peers and trackers see it)", \.engine.bittorrent.enabled),
        text(
            "bittorrent-listen", "IP:PORT", default: "0.0.0.0:6881,[::]:6881",
            help: "where BitTorrent peers connect: comma-separated IP:PORT (or DEVICE:PORT, a VPN's "
                + "interface); port 0 picks one", sample: "127.0.0.1:0"
        ) { given, config throws(ServeConfig.Invalid) in
            let parts = given.text.split(separator: ",", omittingEmptySubsequences: false)
            guard given.text.utf8.count <= 512, !parts.isEmpty,
                parts.allSatisfy({ part in
                    guard let colon = part.lastIndex(of: ":"), colon > part.startIndex,
                        let port = Int(part[part.index(after: colon)...]), (0...65535).contains(port)
                    else { return false }
                    return part[..<colon].utf8.allSatisfy { ASCII.isLetterOrDigit($0) || "[].:-_%".utf8.contains($0) }
                })
            else {
                throw given.invalid("must be IP:PORT pairs like 0.0.0.0:6881,[::]:6881, not '\(given.text)'")
            }
            config.engine.bittorrent.listen = given.text
        } show: {
            $0.engine.bittorrent.listen
        },
        text(
            "bittorrent-outgoing", "INTERFACE",
            help: "the interface or address BitTorrent's outgoing connections are bound to (a VPN's)",
            sample: "wg0"
        ) { given, config throws(ServeConfig.Invalid) in
            guard !given.text.isEmpty, given.text.utf8.count <= 256,
                given.text.utf8.allSatisfy({ ASCII.isLetterOrDigit($0) || ".:-_%".utf8.contains($0) })
            else { throw given.invalid("must be an interface name or an address, not '\(given.text)'") }
            config.engine.bittorrent.outgoingInterface = given.text
        } show: {
            $0.engine.bittorrent.outgoingInterface
        },
        toggle(
            "bittorrent-dht", help: "find peers through the DHT (off: trackers and magnets' peers only)",
            \.engine.bittorrent.dht),
        toggle(
            "bittorrent-lsd", help: "find peers on the local network (local service discovery)",
            \.engine.bittorrent.lsd),
        toggle(
            "bittorrent-port-mapping", help: "ask the router to forward the listen port (UPnP and NAT-PMP)",
            \.engine.bittorrent.portMapping),
        text(
            "bittorrent-encryption", "CHOICE", default: "prefer",
            help: "peer connections' encryption: prefer, require or refuse", sample: "require"
        ) { given, config throws(ServeConfig.Invalid) in
            guard let choice = TorrentSettings.Encryption(rawValue: given.text.lowercased()) else {
                throw given.invalid("must be prefer, require or refuse, not '\(given.text)'")
            }
            config.engine.bittorrent.encryption = choice
        } show: {
            $0.engine.bittorrent.encryption.rawValue
        },
        bytes(
            "bittorrent-upload-limit", 0...(Int64(1) << 40), default: "0", shown: "none",
            help: "bytes per second uploaded to peers over all torrents; 0 for none", sample: "1M",
            sampleShown: "1048576", \.engine.bittorrent.uploadLimit),
        text(
            "bittorrent-seed-ratio", "RATIO", default: "0",
            help: "a complete torrent seeds until it uploaded RATIO times its size (0: no ratio limit; with no "
                + "time limit either, it does not seed); a download or category may say otherwise",
            settings: "seed_ratio", sample: "1.5"
        ) { given, config throws(ServeConfig.Invalid) in
            guard let ratio = Double(given.text), ratio >= 0, ratio <= 10_000 else {
                throw given.invalid("must be a number from 0 to 10000, not '\(given.text)'")
            }
            config.engine.bittorrent.seeding.ratio = ratio
        } show: {
            ServerOption.number($0.engine.bittorrent.seeding.ratio)
        },
        integer(
            "bittorrent-seed-time", 0...315_360_000, "SECONDS", default: "0",
            help: "a complete torrent seeds at most this long (0: no time limit; with no ratio limit either, it "
                + "does not seed); a download or category may say otherwise", settings: "seed_time",
            sample: "3600", \.bittorrentSeedTime),
    ]

    /// The qBittorrent-compatible Web API's rows (`/api/v2/`, on the server's port and on its own if asked).
    static let qbittorrent: [ServerOption] = [
        address(
            "qbittorrent-listen",
            help: "a further address serving the same API, for qBittorrent clients (`127.0.0.1:8080`)",
            sample: "127.0.0.1:8081", \.qbittorrentListen),
        text(
            "qbittorrent-user", "NAME", default: "admin",
            help: "the user name qBittorrent clients log in with (the password is the token)", sample: "sonarr"
        ) { given, config throws(ServeConfig.Invalid) in
            guard !given.text.isEmpty, given.text.utf8.count <= 128,
                !given.text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else {
                throw given.invalid("must be 1 to 128 bytes without control characters")
            }
            config.qbittorrent.username = given.text
        } show: {
            $0.qbittorrent.username
        },
        toggle(
            "qbittorrent-list-all",
            help: "list HTTP, FTP and HLS downloads to qBittorrent clients too (not only "
                + "torrents)", \.qbittorrent.listAll),
    ]
}

extension ServeConfig {
    /// The seeding time limit as the integer row sets it.
    var bittorrentSeedTime: Int {
        get { Int(engine.bittorrent.seeding.seconds) }
        set { engine.bittorrent.seeding.seconds = Int64(newValue) }
    }
}
