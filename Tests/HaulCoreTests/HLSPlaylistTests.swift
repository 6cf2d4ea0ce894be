import Foundation
import HaulLoop
import XCTest

@testable import HaulCore

/// Reading playlists (RFC 8216) and choosing variants: tables of what a playlist says and what Haul makes of it.
final class HLSPlaylistTests: XCTestCase {
    private let base = "https://cdn.test/show/index.m3u8"

    private func media(_ text: String) throws -> HLSMediaPlaylist {
        guard case .media(let playlist) = try HLSParser.parse(Array(text.utf8), url: base) else {
            throw XCTSkip("not a media playlist")
        }
        return playlist
    }

    func testAMediaPlaylistsSegmentsKeysMapsAndRangesAreRead() throws {
        let playlist = try media(
            """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MEDIA-SEQUENCE:41
            #EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"
            #EXT-X-KEY:METHOD=AES-128,URI="https://keys.test/k1",IV=0x000102030405060708090A0B0C0D0E0F
            #EXTINF:4.0,
            #EXT-X-BYTERANGE:1000@720
            media.mp4
            #EXTINF:3.5,title
            #EXT-X-BYTERANGE:500
            media.mp4
            #EXT-X-DISCONTINUITY
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:2,
            ../other/seg.m4s?token=a,b
            #EXT-X-ENDLIST
            """)
        XCTAssertTrue(playlist.endList)
        XCTAssertEqual(
            playlist.segments.map(\.uri),
            [
                "https://cdn.test/show/media.mp4", "https://cdn.test/show/media.mp4",
                "https://cdn.test/other/seg.m4s?token=a,b",
            ])
        XCTAssertEqual(playlist.segments.map(\.sequence), [41, 42, 43])
        XCTAssertEqual(playlist.segments[0].range, HLSByteRange(length: 1000, offset: 720))
        XCTAssertEqual(
            playlist.segments[1].range, HLSByteRange(length: 500, offset: 1720), "follows the previous range")
        XCTAssertEqual(playlist.segments.map(\.key), [0, 0, nil])
        XCTAssertEqual(playlist.keys[0].uri, "https://keys.test/k1")
        XCTAssertEqual(playlist.keys[0].iv, Array(0..<16))
        XCTAssertEqual(playlist.segments.map(\.discontinuity), [false, false, true])
        XCTAssertEqual(
            playlist.maps, [HLSMap(uri: "https://cdn.test/show/init.mp4", range: HLSByteRange(length: 720, offset: 0))])
        XCTAssertEqual(playlist.duration, 9.5)
        XCTAssertNil(playlist.exactBytes, "an encrypted segment's size is known only once decrypted")
    }

    func testWhatHaulWillNotFollowIsRefusedByName() {
        let cases: [(String, String)] = [
            ("#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            ("#EXTM3U\n#EXTINF:1,\ndata:text/plain,hi\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            ("#EXTM3U\n#EXTINF:1,\nftp://host/seg.ts\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            ("#EXTM3U\n#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"k\"\n#EXTINF:1,\ns.ts\n", "playlist_unsupported"),
            (
                "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",KEYFORMAT=\"com.widevine\"\n#EXTINF:1,\ns.ts\n",
                "playlist_unsupported"
            ),
            ("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x01\n#EXTINF:1,\ns.ts\n", "playlist_invalid"),
            ("#EXTM3U\ns.ts\n", "playlist_invalid"),
            ("not a playlist", "playlist_invalid"),
            ("#EXTM3U\n#EXT-X-ENDLIST\n", "playlist_invalid"),
            ("#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=1x1\nv.m3u8\n", "playlist_invalid"),
        ]
        for (text, code) in cases {
            XCTAssertThrowsError(try HLSParser.parse(Array(text.utf8), url: base), text) { error in
                XCTAssertEqual((error as? PlaylistError)?.code, code, text)
            }
        }
        let many = "#EXTM3U\n" + String(repeating: "#EXTINF:1,\ns.ts\n", count: HLSParser.maxSegments + 1)
        XCTAssertThrowsError(try HLSParser.parse(Array(many.utf8), url: base))
    }

    func testAMastersVariantIsChosenByBandwidthHeightOrName() throws {
        let text = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en",DEFAULT=YES,URI="en.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud",NAME="SD"
            sd.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,AUDIO="aud",NAME="Full HD"
            fhd.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2500000,RESOLUTION=1280x720,AUDIO="aud"
            hd.m3u8
            """
        guard case .master(let variants, let renditions) = try HLSParser.parse(Array(text.utf8), url: base) else {
            return XCTFail("a master playlist")
        }
        XCTAssertEqual(renditions.map(\.name), ["English"])
        let cases: [(String?, String)] = [
            (nil, "fhd"), ("best", "fhd"), ("worst", "sd"), ("720", "hd"), ("720p", "hd"), ("1000", "hd"),
            ("240", "sd"), ("3M", "hd"), ("2500k", "hd"), ("100k", "sd"), ("3000000", "hd"), ("full hd", "fhd"),
            ("SD", "sd"),
        ]
        for (wanted, expected) in cases {
            let chosen = try HLSVariantChoice.choose(variants, by: wanted)
            XCTAssertEqual(chosen.uri, "https://cdn.test/show/\(expected).m3u8", wanted ?? "default")
        }
        XCTAssertThrowsError(try HLSVariantChoice.choose(variants, by: "4K")) { error in
            XCTAssertEqual((error as? PlaylistError)?.code, "variant_not_found")
        }
    }

    func testAES128DecryptsWithTheSequenceNumbersIVAndRefusesTheWrongKey() throws {
        // openssl enc -aes-128-cbc -K 000102030405060708090a0b0c0d0e0f -iv <sequence 5> of "hello, segment"
        let key = Array(UInt8(0)..<16)
        let iv = HLSStream.iv(sequence: 5)
        XCTAssertEqual(iv, Array(repeating: 0, count: 15) + [5])
        let plain = Array("hello, segment".utf8)
        let sealed = try XCTUnwrap(encrypt(plain, key: key, iv: iv))
        XCTAssertEqual(try Cipher.aes128CBCDecrypt(sealed, key: key, iv: iv), plain)
        XCTAssertThrowsError(try Cipher.aes128CBCDecrypt(sealed, key: Array(repeating: 9, count: 16), iv: iv))
        XCTAssertThrowsError(try Cipher.aes128CBCDecrypt(Array(sealed.dropLast()), key: key, iv: iv))
    }

    /// The reference encryption, by the openssl command.
    private func encrypt(_ plain: [UInt8], key: [UInt8], iv: [UInt8]) throws -> [UInt8] {
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("haul-aes-\(getpid())")
        try Data(plain).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["enc", "-aes-128-cbc", "-K", hex(key), "-iv", hex(iv), "-in", input.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Array(data)
    }

    func testTheIndexLocatesAnOffsetOnlyForItsOwnPlaylist() {
        let index = HLSIndex()
        index.begin("\"hls-a\"")
        for size: Int64 in [100, 50, 200] { index.append(size) }
        XCTAssertEqual(index.locate(0, fingerprint: "\"hls-a\"")?.piece, 0)
        XCTAssertEqual(index.locate(120, fingerprint: "\"hls-a\"").map { [$0.piece, Int($0.skip)] }, [1, 20])
        XCTAssertEqual(index.locate(350, fingerprint: "\"hls-a\"").map { [$0.piece, Int($0.skip)] }, [3, 0])
        XCTAssertNil(index.locate(351, fingerprint: "\"hls-a\""), "past what the index covers")
        XCTAssertNil(index.locate(120, fingerprint: "\"hls-b\""), "another version of the playlist")
    }
}
