import Foundation

/// HLS playlists made by Debian's ffmpeg (the reference muxer and decoder), once per test run: MPEG-TS segments,
/// AES-128 by ffmpeg's key info file, fMP4 with an init section, byte ranges of one file, a master playlist of
/// three variants, and keys rotating mid-playlist (ffmpeg's segments encrypted by openssl under two keys, one with
/// an explicit IV and one with the sequence number's).
enum HLSFixtures {
    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
    }

    nonisolated(unsafe) private static var made: String?
    private static let lock = NSLock()

    /// The directory holding every fixture (made on first use).
    static func directory() throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let made { return made }
        let root = NSTemporaryDirectory() + "haul-hls-\(getpid())"
        try? FileManager.default.removeItem(atPath: root)
        for sub in ["ts", "aes", "fmp4", "single", "master", "rotate/keys"] {
            try FileManager.default.createDirectory(atPath: root + "/" + sub, withIntermediateDirectories: true)
        }
        chmod(root, 0o755)
        let source = [
            "-f", "lavfi", "-i", "testsrc=duration=20:size=320x240:rate=25", "-f", "lavfi", "-i",
            "sine=frequency=440:duration=20", "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac",
        ]
        let vod = ["-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod"]
        try ffmpeg(source + vod + ["-hls_segment_filename", "\(root)/ts/seg%03d.ts", "\(root)/ts/index.m3u8"])
        // AES-128 as ffmpeg writes it: the key's URI relative to the playlist, the IV from the sequence number.
        let key = Data((0..<16).map { UInt8($0 * 7 + 3) })
        try key.write(to: URL(fileURLWithPath: root + "/aes/key.bin"))
        try "key.bin\n\(root)/aes/key.bin\n".write(toFile: root + "/aes/keyinfo", atomically: true, encoding: .utf8)
        try ffmpeg(
            source + vod + [
                "-hls_key_info_file", "\(root)/aes/keyinfo", "-hls_segment_filename", "\(root)/aes/seg%03d.ts",
                "\(root)/aes/index.m3u8",
            ])
        try ffmpeg(
            source + vod + [
                "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename",
                "\(root)/fmp4/seg%03d.m4s", "\(root)/fmp4/index.m3u8",
            ])
        try ffmpeg(source + vod + ["-hls_flags", "single_file", "\(root)/single/index.m3u8"])
        try ffmpeg([
            "-f", "lavfi", "-i", "testsrc=duration=6:size=640x360:rate=25", "-filter_complex",
            "[0:v]split=3[a][b][c];[b]scale=426:240[b2];[c]scale=256:144[c2]", "-map", "[a]", "-map", "[b2]", "-map",
            "[c2]", "-c:v", "libx264", "-preset", "ultrafast", "-b:v:0", "800k", "-b:v:1", "400k", "-b:v:2", "200k",
            "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-master_pl_name", "master.m3u8",
            "-var_stream_map", "v:0 v:1 v:2", "-hls_segment_filename", "\(root)/master/v%v/seg%03d.ts",
            "\(root)/master/v%v/index.m3u8",
        ])
        try rotate(root)
        made = root
        return root
    }

    /// The TS fixture's ten segments, encrypted under key A (segments 1-5, explicit IV) then key B (6-10, IV from
    /// the media sequence, which starts at 7 here).
    private static func rotate(_ root: String) throws {
        let keyA = String(repeating: "1f", count: 16)
        let keyB = String(repeating: "a5", count: 16)
        let ivA = "000102030405060708090a0b0c0d0e0f"
        try Data(hex: keyA).write(to: URL(fileURLWithPath: root + "/rotate/keys/a.bin"))
        try Data(hex: keyB).write(to: URL(fileURLWithPath: root + "/rotate/keys/b.bin"))
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n"
        playlist += "#EXT-X-PLAYLIST-TYPE:VOD\n"
        for n in 0..<10 {
            let name = String(format: "seg%03d.ts", n)
            if n == 0 { playlist += "#EXT-X-KEY:METHOD=AES-128,URI=\"keys/a.bin\",IV=0x\(ivA)\n" }
            if n == 5 { playlist += "#EXT-X-KEY:METHOD=AES-128,URI=\"keys/b.bin\"\n" }
            let iv = n < 5 ? ivA : String(format: "%032x", 7 + n)
            try runCommand(
                "/usr/bin/openssl",
                [
                    "enc", "-aes-128-cbc", "-K", n < 5 ? keyA : keyB, "-iv", iv, "-in", "\(root)/ts/\(name)", "-out",
                    "\(root)/rotate/\(name)",
                ])
            playlist += "#EXTINF:2.000000,\n\(name)\n"
        }
        playlist += "#EXT-X-ENDLIST\n"
        try playlist.write(toFile: root + "/rotate/index.m3u8", atomically: true, encoding: .utf8)
    }

    private static func ffmpeg(_ arguments: [String]) throws {
        let result = try execute("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-y"] + arguments)
        guard result.status == 0 else { throw HarnessError("ffmpeg \(arguments): \(result.output)") }
    }

    /// The decoded frames' hashes of each stream of `input` (a file or a playlist), by ffmpeg's framemd5: what two
    /// files that decode the same share, whatever their timestamps' rounding.
    static func frames(_ input: String) throws -> [String] {
        // ffmpeg's own reading of a playlist is held to media extensions: a key file (key.bin) is let through.
        let playlist = input.hasSuffix(".m3u8") ? ["-allowed_extensions", "ALL"] : []
        let result = try execute(
            "/usr/bin/ffmpeg",
            ["-hide_banner", "-loglevel", "error"] + playlist + ["-i", input, "-map", "0", "-f", "framemd5", "-"])
        guard result.status == 0 else { throw HarnessError("ffmpeg framemd5 \(input): \(result.output)") }
        return result.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            return "\(fields.first ?? ""):\(fields.last ?? "")"
        }
    }

    /// The bytes of `names` in `directory`, one after another.
    static func concatenated(_ directory: String, _ names: [String]) throws -> Data {
        var all = Data()
        for name in names { all.append(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))) }
        return all
    }
}

extension Data {
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
