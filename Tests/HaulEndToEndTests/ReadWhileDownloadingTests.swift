import Foundation
import XCTest

/// `GET /downloads/{id}/file` on a download still arriving: the bytes on disk at once, the rest as it lands, never
/// a byte that is not there or one of another version of the file.
final class ReadWhileDownloadingTests: HaulTestCase {
    /// A file read straight off a socket, so a test sees the answer begin and end as it happens.
    private final class RawRead {
        let fd: Int32
        var status = 0
        var headers: [String: String] = [:]
        var body = Data()
        /// The connection ended (by the server's close or the end of the body).
        var ended = false
        private var buffer = Data()

        init(port: UInt16, path: String, headers extra: [String: String] = [:]) throws {
            fd = try connectToLoopback(port: port)
            var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            for (name, value) in extra { request += "\(name): \(value)\r\n" }
            request += "\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), 0) }
            while !buffer.contains(Data("\r\n\r\n".utf8)) {
                guard try receive(timeout: 30) else { throw HarnessError("no answer to \(path)") }
            }
            let end = buffer.range(of: Data("\r\n\r\n".utf8))!
            let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            status = Int(head[0].split(separator: " ")[1]) ?? 0
            for line in head.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                self.headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                    .trimmingCharacters(in: .whitespaces)
            }
            body = buffer[end.upperBound...]
        }

        deinit { close(fd) }

        var length: Int? { headers["content-length"].flatMap { Int($0) } }

        /// Reads until the body has `count` bytes or the connection ends; false on timeout.
        @discardableResult
        func read(until count: Int, timeout: TimeInterval = 30) throws -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while body.count < count, !ended {
                guard Date() < deadline, try receive(timeout: deadline.timeIntervalSinceNow) else { return false }
            }
            return true
        }

        /// Reads until the connection closes (or the whole Content-Length arrived).
        func readToEnd(timeout: TimeInterval = 60) throws {
            try read(until: length ?? .max, timeout: timeout)
        }

        private func receive(timeout: TimeInterval) throws -> Bool {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(max(1, timeout * 1000))) > 0 else { return false }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 {
                ended = true
                return true
            }
            if status == 0 { buffer.append(contentsOf: chunk[0..<n]) } else { body.append(contentsOf: chunk[0..<n]) }
            return true
        }
    }

    // Segments of 1 MB, so a file of a few MB is split over the connections asked for.
    override var serveArguments: [String] { super.serveArguments + ["--min-split-size", "1M"] }

    private var port: UInt16 { UInt16(haul.baseURL.split(separator: ":").last!)! }

    private func source(_ name: String, size: Int) throws -> Data {
        _ = try sandbox.makeRandomFile("www/\(name)", size: size)
        return try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/\(name)")))
    }

    func testAReadFromTheStartGetsEveryByteAsItLandsBeforeTheDownloadCompletes() throws {
        let data = try source("film.bin", size: 3_000_000)
        // One connection at 1 MB/s: the whole download takes about three seconds.
        let id = try add(["url": originURL("film.bin", "rate=1000000"), "connections": 1])
        try waitFor("bytes on disk") { ((try download(id))["contiguous_bytes"] as? Int ?? 0) > 0 }
        let read = try RawRead(port: port, path: "/downloads/\(id)/file")
        XCTAssertEqual(read.status, 200)
        XCTAssertEqual(read.length, 3_000_000)
        XCTAssertEqual(read.headers["cache-control"], "no-store")
        XCTAssertEqual(read.headers["accept-ranges"], "bytes")
        XCTAssertTrue(try read.read(until: 100_000))
        let during = try download(id)
        XCTAssertEqual(during["state"] as? String, "downloading", "the first bytes came while it downloaded")
        let available = try XCTUnwrap(during["available"] as? [[Int]])
        XCTAssertEqual(available.first?.first, 0)
        XCTAssertLessThan(available.first?.last ?? .max, 3_000_000)
        try read.readToEnd()
        XCTAssertEqual(read.body, data, "every byte, in order, of the one version")
        try waitForState(id, "completed")
        let finished = try download(id)
        XCTAssertEqual(finished["available"] as? [[Int]], [[0, 3_000_000]])
        XCTAssertEqual(finished["contiguous_bytes"] as? Int, 3_000_000)
    }

    func testARangeAheadIsAnsweredFromItsOwnSegment() throws {
        let data = try source("archive.bin", size: 4_000_000)
        // Two connections: the second segment starts at 2,000,000, each at 500 kB/s.
        let id = try add(["url": originURL("archive.bin", "rate=500000"), "connections": 2])
        let read = try RawRead(
            port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=2000000-2099999"])
        XCTAssertEqual(read.status, 206)
        XCTAssertEqual(read.headers["content-range"], "bytes 2000000-2099999/4000000")
        try read.readToEnd()
        XCTAssertEqual(read.body, data[2_000_000..<2_100_000])
        XCTAssertEqual((try download(id))["state"] as? String, "downloading", "answered before it completed")
        // Two readers at once at other offsets, and HEAD.
        let head = try api.request("HEAD", "/downloads/\(id)/file", headers: ["Range": "bytes=10-19"])
        XCTAssertEqual(head.status, 206)
        XCTAssertEqual(head.header("Content-Length"), "10")
        let first = try RawRead(port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=0-499999"])
        let second = try RawRead(
            port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=2500000-2999999"])
        try first.readToEnd()
        try second.readToEnd()
        XCTAssertEqual(first.body, data[0..<500_000])
        XCTAssertEqual(second.body, data[2_500_000..<3_000_000])
        try waitForState(id, "completed")
    }

    func testWhatAReaderAsksIsFetchedFirst() throws {
        let data = try source("movie.bin", size: 8_000_000)
        // Two connections at 400 kB/s each: in order, the last 100 kB would come after about ten seconds.
        let id = try add(["url": originURL("movie.bin", "rate=400000"), "connections": 2])
        try waitFor("the download to fetch") { (try download(id))["state"] as? String == "downloading" }
        let read = try RawRead(
            port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=7900000-7999999"])
        XCTAssertEqual(read.status, 206)
        try read.readToEnd()
        XCTAssertEqual(read.body, data[7_900_000..<8_000_000])
        let then = try download(id)
        XCTAssertEqual(then["state"] as? String, "downloading")
        let received = try XCTUnwrap(then["received_bytes"] as? Int)
        XCTAssertLessThan(received, 4_000_000, "the asked range came before the bytes ahead of it")
        XCTAssertTrue(
            (then["available"] as? [[Int]] ?? []).contains { $0[0] <= 7_900_000 && $0[1] >= 8_000_000 },
            "\(then["available"] ?? "")")
        XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204)
    }

    func testAPausedDownloadGivesWhatIsOnDiskThenEndsAndRefusesWhatIsNot() throws {
        let data = try source("paused.bin", size: 2_000_000)
        let id = try add(["url": originURL("paused.bin", "rate=400000"), "connections": 1])
        try waitFor("some bytes on disk") { ((try download(id))["contiguous_bytes"] as? Int ?? 0) >= 200_000 }
        XCTAssertEqual(try patch(id, ["state": "paused"]).status, 200)
        try waitForState(id, "paused")
        let onDisk = try XCTUnwrap((try download(id))["contiguous_bytes"] as? Int)
        XCTAssertLessThan(onDisk, 2_000_000)
        // From 0: the bytes contiguous from 0, then the connection closes short of the length (never a hang).
        let read = try RawRead(port: port, path: "/downloads/\(id)/file")
        XCTAssertEqual(read.status, 200)
        try read.readToEnd(timeout: 10)
        XCTAssertTrue(read.ended, "the read ended")
        XCTAssertEqual(read.body, data.prefix(onDisk))
        // A range wholly past what is on disk: 409 naming the state.
        let past = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=1900000-"])
        XCTAssertEqual(past.status, 409, past.text)
        XCTAssertTrue(past.text.contains("paused"), past.text)
        XCTAssertEqual(past.header("Content-Type"), "application/problem+json")
        // A queued one is started by a reader only when asked.
        let queued = try add(["url": originURL("paused.bin"), "start_paused": true, "filename": "other.bin"])
        XCTAssertEqual(try api.get("/downloads/\(queued)/file").status, 409)
    }

    func testAReaderIsCutOffWhenTheFileChangesAndNeverHandedAMix() throws {
        let old = try source("news.bin", size: 2_000_000)
        let new = try source("news-v2.bin", size: 2_000_000)
        // The first body is cut at 1.2 MB; the retry (If-Range) finds another version: 200 with the new file (cut
        // at 1.2 MB too, then its rest by range).
        let id = try add([
            "url": originURL("news.bin", "rate=1000000&cut=1200000&swap=news-v2.bin&after=1"), "connections": 1,
        ])
        try waitFor("bytes on disk") { ((try download(id))["contiguous_bytes"] as? Int ?? 0) > 0 }
        let read = try RawRead(port: port, path: "/downloads/\(id)/file")
        try read.readToEnd()
        XCTAssertTrue(read.ended)
        XCTAssertLessThan(read.body.count, 2_000_000, "cut off, not padded")
        XCTAssertEqual(read.body, old.prefix(read.body.count), "only bytes of the first version")
        try waitForState(id, "completed")
        XCTAssertEqual(try api.get("/downloads/\(id)/file").body, new)
    }

    func testHaulCatWritesTheFileToStandardOutputAsItArrives() throws {
        let hash = try sandbox.makeRandomFile("www/cat.bin", size: 2_000_000)
        let data = try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/cat.bin")))
        let id = try add(["url": originURL("cat.bin", "rate=700000"), "connections": 2])
        let haulPath = buildDirectory + "/haul"
        func cat(_ arguments: String) throws -> String {
            let output = try runCommand(
                "/bin/bash",
                ["-c", "set -o pipefail; '\(haulPath)' cat \(id) --server \(haul.baseURL) \(arguments) | sha256sum"])
            return String(output.prefix(64))
        }
        XCTAssertEqual(try cat(""), hash, "haul cat ID | sha256sum is the source's")
        let part = sandbox.file("part.bin")
        try data[1000..<2000].write(to: URL(fileURLWithPath: part))
        XCTAssertEqual(try cat("--range 1000-1999"), try sha256(part))
        try waitForState(id, "completed")
        let wrong = try execute(haulPath, ["cat", id, "--server", haul.baseURL, "--range", "9-1"])
        XCTAssertEqual(wrong.status, 2, wrong.output)
    }

    /// `sequential` fetches from the start in order; `first_last` the first and the last piece first.
    func testSequentialAndFirstLastOrderTheRequests() throws {
        _ = try source("in-order.bin", size: 4_000_000)
        let sequential = try add([
            "url": originURL("in-order.bin"), "connections": 2, "sequential": true, "filename": "a.bin",
        ])
        try waitForState(sequential, "completed")
        XCTAssertEqual((try download(sequential))["sequential"] as? Bool, true)
        let starts = try originRequests().filter { ($0["method"] as? String) == "GET" }
            .compactMap { ($0["range"] as? String)?.dropFirst(6).split(separator: "-").first.flatMap { Int($0) } }
        // In order from the start; two connections freed in one turn ask for the next two pieces together, and
        // those two requests may reach the origin either way round (seen under ASan), so a piece may come before
        // the one asked just before it, never before any asked earlier.
        XCTAssertEqual(starts.first, 0, "\(starts)")
        // The second connection begins at the next piece (spread over the file, it would begin halfway).
        XCTAssertEqual(Set(starts.prefix(2)), Set(starts.sorted().prefix(2)), "\(starts)")
        for index in starts.indices.dropFirst(2) {
            XCTAssertGreaterThan(starts[index], starts[..<(index - 1)].max()!, "pieces asked for in order: \(starts)")
        }
        XCTAssertGreaterThanOrEqual(starts.count, 4, "\(starts)")

        _ = try originClient.request("DELETE", "/_requests")
        let firstLast = try add([
            "url": originURL("in-order.bin", "rate=2000000"), "connections": 3, "first_last": true, "filename": "b.bin",
        ])
        try waitForState(firstLast, "completed")
        let asked = try originRequests().filter { ($0["method"] as? String) == "GET" }
            .compactMap { $0["range"] as? String }
        XCTAssertEqual(asked.first, "bytes=0-", "\(asked)")
        XCTAssertTrue(
            asked.prefix(3).contains { $0.hasPrefix("bytes=3000000-") }, "the last piece among the first: \(asked)")
    }

    /// A queued download is started ahead of the queue for a reader only when the reader asks (`?start=1`).
    func testAQueuedDownloadStartsForAReaderOnlyWhenAsked() throws {
        _ = try source("hold.bin", size: 1_000_000)
        let data = try source("wanted.bin", size: 300_000)
        // Five slow downloads hold every slot (--max-active is 5).
        let holders = try (0..<5).map { i in
            try add(["url": originURL("hold.bin", "rate=20000"), "filename": "hold\(i).bin", "connections": 1])
        }
        let queued = try add(["url": originURL("wanted.bin"), "connections": 1])
        try waitFor("every slot taken") {
            try holders.allSatisfy { (try download($0))["state"] as? String == "downloading" }
        }
        XCTAssertEqual((try download(queued))["state"] as? String, "queued")
        let refused = try api.get("/downloads/\(queued)/file")
        XCTAssertEqual(refused.status, 409, refused.text)
        XCTAssertTrue(refused.text.contains("queued"), refused.text)
        let read = try RawRead(port: port, path: "/downloads/\(queued)/file?start=1")
        XCTAssertEqual(read.status, 200)
        try read.readToEnd()
        XCTAssertEqual(read.body, data)
        try waitForState(queued, "completed")
        for id in holders { XCTAssertEqual(try api.request("DELETE", "/downloads/\(id)").status, 204) }
    }

    /// A server killed mid-read: the reader's connection ends, and after the restart a read gets the same bytes.
    func testAReadAfterAKillAndARestartGetsTheSameBytes() throws {
        let data = try source("survivor.bin", size: 3_000_000)
        let id = try add(["url": originURL("survivor.bin", "rate=500000"), "connections": 2])
        let read = try RawRead(port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=0-2999999"])
        XCTAssertTrue(try read.read(until: 200_000))
        haul.stop(signal: SIGKILL)
        try read.readToEnd(timeout: 10)
        XCTAssertTrue(read.ended)
        XCTAssertEqual(read.body, data.prefix(read.body.count), "what came before the kill is the file's")
        try startHaul()
        let again = try RawRead(port: port, path: "/downloads/\(id)/file", headers: ["Range": "bytes=1000000-1999999"])
        XCTAssertEqual(again.status, 206)
        try again.readToEnd()
        XCTAssertEqual(again.body, data[1_000_000..<2_000_000])
        try waitForState(id, "completed")
    }
}
