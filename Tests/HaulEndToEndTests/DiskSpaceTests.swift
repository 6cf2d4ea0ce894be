import Foundation
import XCTest

/// An origin can announce any size, or never end its body. The disk is shared with everything else on the machine:
/// a download that cannot fit fails alone (`insufficient_space`, `file_too_large`) before taking a block, and a
/// failed download gives back what it reserved.
final class DiskSpaceTests: HaulTestCase {
    override var serveArguments: [String] { ["--retry-wait", "0.1", "--max-attempts", "2", "--stall-timeout", "2"] }

    private var hostile: HostileOrigin!

    override func tearDownWithError() throws {
        hostile?.stop()
        hostile = nil
        try super.tearDownWithError()
    }

    /// An origin that announces `length` bytes with ranges and a validator, and sends `body` for any GET.
    private func announce(_ length: Int64, body: [UInt8] = [], chunked: Bool = false) throws {
        hostile = try HostileOrigin { request in
            let head = ["Content-Length: \(length)", "Accept-Ranges: bytes", "ETag: \"v1\"", "Connection: close"]
            if request.method == "HEAD" { return .send(HostileOrigin.reply(headers: head)) }
            if chunked {
                return .sendForever(
                    HostileOrigin.reply(headers: ["Transfer-Encoding: chunked", "Connection: close"]),
                    chunk: Array("10000\r\n".utf8) + [UInt8](repeating: 7, count: 0x10000)
                        + Array("\r\n".utf8))
            }
            if let range = request.headers["range"], range.hasPrefix("bytes="),
                let start = Int64(range.dropFirst(6).prefix { $0 != "-" })
            {
                // A well-formed 206 for the range asked, cut short like the first answer.
                let last = Int64(range.split(separator: "-").last ?? "").map { min($0, length - 1) } ?? length - 1
                return .send(
                    HostileOrigin.reply(
                        "206 Partial Content",
                        headers: [
                            "Content-Range: bytes \(start)-\(last)/\(length)", "Content-Length: \(last - start + 1)",
                            "ETag: \"v1\"", "Connection: close",
                        ], body: Array(body.prefix(Int(last - start + 1)))))
            }
            return .send(HostileOrigin.reply(headers: head, body: body))
        }
    }

    private func errorCode(_ download: [String: Any]) -> String? {
        (download["error"] as? [String: Any])?["code"] as? String
    }

    private func errorMessage(_ download: [String: Any]) -> String {
        (download["error"] as? [String: Any])?["message"] as? String ?? ""
    }

    /// Bytes of disk the file holds (its blocks), nil if there is none.
    private func allocated(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_blocks) * 512 : nil
    }

    private func freeBytes(_ path: String) -> Int64 {
        var info = statvfs()
        statvfs(path, &info)
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    func testATerabyteAnnouncedFailsThatDownloadAloneWithoutReservingABlock() throws {
        try announce(1 << 40)
        let hash = try sandbox.makeRandomFile("www/fine.bin", size: 300_000)
        let failed = try waitForState(try add(["url": hostile.baseURL + "/huge.iso"]), "failed")
        XCTAssertEqual(errorCode(failed), "insufficient_space", "\(failed)")
        XCTAssertTrue(errorMessage(failed).contains("min-free-space"), errorMessage(failed))
        XCTAssertEqual(int(failed["attempts"]), 1, "not retried: the disk will not grow by waiting")
        // Nothing was reserved for it, and the next download is unaffected.
        XCTAssertEqual(allocated(sandbox.file("downloads/huge.iso.part")) ?? 0, 0)
        let done = try waitForState(try add(["url": originURL("fine.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
        // A restart gives nothing back because nothing was taken; the failed download stays failed.
        haul.stop()
        try startHaul()
        XCTAssertEqual(allocated(sandbox.file("downloads/huge.iso.part")) ?? 0, 0)
        XCTAssertEqual(try download(try XCTUnwrap(failed["id"] as? String))["state"] as? String, "failed")
    }

    func testTheReserveIsKeptFree() throws {
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        // Leave 64 MiB above the reserve: a 256 MiB file cannot fit, a 300 KB one can.
        let reserve = freeBytes(sandbox.file("downloads")) - (64 << 20)
        haul.stop()
        try startHaul(extra: ["--min-free-space", String(reserve)])
        try announce(256 << 20)
        let failed = try waitForState(try add(["url": hostile.baseURL + "/big.iso"]), "failed")
        XCTAssertEqual(errorCode(failed), "insufficient_space", "\(failed)")
        let hash = try sandbox.makeRandomFile("www/small.bin", size: 300_000)
        let done = try waitForState(try add(["url": originURL("small.bin")]), "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testAKnownSizeThatCannotFitIsRefusedOnPOST() throws {
        let tooBig = try api.request("POST", "/downloads", json: ["url": "http://127.0.0.1:9/x.iso", "size": 1 << 50])
        XCTAssertEqual(tooBig.status, 507, tooBig.text)
        XCTAssertEqual(tooBig.header("Content-Type"), "application/problem+json")
        XCTAssertEqual(tooBig.json["type"] as? String, "urn:haul:problem:insufficient-space")
        XCTAssertEqual(try api.get("/stats").json["downloads"] as? Int, 0, "nothing was added")

        haul.stop()
        try startHaul(extra: ["--max-file-size", "1M"])
        let overLimit = try api.request(
            "POST", "/downloads",
            json: [
                "url": "http://127.0.0.1:9/y.iso",
                "size": 2 << 20,
            ])
        XCTAssertEqual(overLimit.status, 507)
        XCTAssertEqual(overLimit.json["type"] as? String, "urn:haul:problem:file-too-large")
        XCTAssertEqual(
            try api.request(
                "POST", "/downloads",
                json: [
                    "url": "http://127.0.0.1:9/z.iso",
                    "size": 1000, "start_paused": true,
                ]
            ).status, 201)
    }

    func testStatsAndMetricsShowTheFreeSpaceThatPOSTIsCheckedAgainst() throws {
        try FileManager.default.createDirectory(atPath: sandbox.file("downloads"), withIntermediateDirectories: true)
        let reserve: Int64 = 64 << 20
        haul.stop()
        try startHaul(extra: ["--min-free-space", String(reserve)])
        let disk = try XCTUnwrap(try api.get("/stats").json["disk"] as? [String: Any])
        let free = try XCTUnwrap((disk["free_bytes"] as? NSNumber)?.int64Value)
        let usable = try XCTUnwrap((disk["usable_bytes"] as? NSNumber)?.int64Value)
        // Other processes write to this disk too: the figures agree with statvfs within 256 MiB.
        XCTAssertLessThan(abs(free - freeBytes(sandbox.file("downloads"))), 256 << 20)
        XCTAssertEqual((disk["reserved_bytes"] as? NSNumber)?.int64Value, reserve)
        XCTAssertEqual(usable, max(0, free - reserve))
        XCTAssertGreaterThanOrEqual((disk["total_bytes"] as? NSNumber)?.int64Value ?? 0, free)
        let metrics = try api.get("/metrics").text
        let line = try XCTUnwrap(metrics.split(separator: "\n").first { $0.hasPrefix("haul_disk_free_bytes ") })
        let exported = try XCTUnwrap(Double(line.split(separator: " ")[1]))
        XCTAssertLessThan(abs(exported - Double(free)), Double(256 << 20))
        XCTAssertTrue(metrics.contains("haul_disk_usable_bytes "), metrics)
        // A size past what /stats says is usable is refused; one well within it is taken.
        let tooBig = try api.request(
            "POST", "/downloads",
            json: [
                "url": "http://127.0.0.1:9/x.iso",
                "size": usable + (1 << 30),
            ])
        XCTAssertEqual(tooBig.status, 507, tooBig.text)
        XCTAssertTrue((tooBig.json["detail"] as? String ?? "").contains("min-free-space"), tooBig.text)
        let fits = try api.request(
            "POST", "/downloads",
            json: [
                "url": "http://127.0.0.1:9/y.iso",
                "size": min(usable / 2, 1 << 20), "start_paused": true,
            ])
        XCTAssertEqual(fits.status, 201, fits.text)
    }

    func testASizeTheOriginContradictsFails() throws {
        try sandbox.makeRandomFile("www/s.bin", size: 5000)
        let failed = try waitForState(try add(["url": originURL("s.bin"), "size": 4000]), "failed")
        XCTAssertEqual(errorCode(failed), "size_mismatch", "\(failed)")
        let hash = try sha256(sandbox.file("www/s.bin"))
        let done = try waitForState(
            try add(["url": originURL("s.bin"), "size": 5000, "filename": "s2.bin"]),
            "completed")
        XCTAssertEqual(try sha256(try downloadedPath(done)), hash)
    }

    func testAnEndlessBodyStopsAtTheLargestFileAccepted() throws {
        haul.stop()
        try startHaul(extra: ["--max-file-size", "1M"])
        hostile = try HostileOrigin { request in
            if request.method == "HEAD" { return .send(HostileOrigin.reply("405 Method Not Allowed")) }
            return .sendForever(
                HostileOrigin.reply(headers: ["Transfer-Encoding: chunked"]),
                chunk: Array("10000\r\n".utf8) + [UInt8](repeating: 7, count: 0x10000)
                    + Array("\r\n".utf8))
        }
        let failed = try waitForState(try add(["url": hostile.baseURL + "/endless"]), "failed", timeout: 30)
        XCTAssertEqual(errorCode(failed), "file_too_large", "\(failed)")
        let part = try XCTUnwrap(failed["filename"] as? String) + ".part"
        let size =
            (try FileManager.default.attributesOfItem(atPath: sandbox.file("downloads/" + part))[.size]
            as? NSNumber)?.int64Value ?? -1
        XCTAssertLessThanOrEqual(size, 1 << 20, "written past the limit")
    }

    func testAFailedDownloadGivesBackWhatItReserved() throws {
        // 64 MiB announced, 100 KB sent, then the connection is cut (twice: the download fails).
        try announce(64 << 20, body: [UInt8](repeating: 1, count: 100_000))
        let failed = try waitForState(try add(["url": hostile.baseURL + "/cut.iso"]), "failed")
        XCTAssertEqual(errorCode(failed), "connection_cut", "\(failed)")
        let part = sandbox.file("downloads/cut.iso.part")
        let held = try XCTUnwrap(allocated(part))
        XCTAssertLessThan(held, 4 << 20, "a failed download still holds \(held) bytes of disk for 64 MiB announced")
        XCTAssertGreaterThan(int(failed["received_bytes"]), 0, "what it received is kept")
    }
}
