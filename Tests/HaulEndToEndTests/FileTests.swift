import Foundation
import XCTest

/// GET /downloads/{id}/file: the finished file, whole or by range, as an attachment, and only while it is still
/// the file Haul wrote.
final class FileTests: HaulTestCase {
    private func finished(_ name: String, size: Int, filename: String? = nil) throws -> (id: String, data: Data) {
        try sandbox.makeRandomFile("www/\(name)", size: size)
        var body: [String: Any] = ["url": originURL(name)]
        if let filename { body["filename"] = filename }
        let id = try add(body)
        _ = try waitForState(id, "completed")
        return (id, try Data(contentsOf: URL(fileURLWithPath: sandbox.file("www/\(name)"))))
    }

    func testTheWholeFileOrARangeWithItsTagAndName() throws {
        let (id, data) = try finished("cv.bin", size: 300_000, filename: "résumé 2026.pdf")
        let whole = try api.get("/downloads/\(id)/file")
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body, data)
        XCTAssertEqual(
            whole.header("Content-Disposition"),
            "attachment; filename=\"r_sum_ 2026.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%202026.pdf")
        XCTAssertEqual(whole.header("Content-Type"), "application/octet-stream")
        XCTAssertEqual(whole.header("Accept-Ranges"), "bytes")
        XCTAssertEqual(whole.header("X-Content-Type-Options"), "nosniff")
        let tag = try XCTUnwrap(whole.header("ETag"))
        XCTAssertTrue(tag.hasPrefix("\"") && !tag.hasPrefix("W/"), "a strong tag: \(tag)")
        XCTAssertNotNil(whole.header("Last-Modified"))

        let part = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=1000-1999"])
        XCTAssertEqual(part.status, 206)
        XCTAssertEqual(part.header("Content-Range"), "bytes 1000-1999/300000")
        XCTAssertEqual(part.body, data[1000..<2000])
        let tail = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=-10"])
        XCTAssertEqual(tail.body, data.suffix(10))
        let rest = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=299990-"])
        XCTAssertEqual(rest.header("Content-Range"), "bytes 299990-299999/300000")
        let beyond = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=300000-"])
        XCTAssertEqual(beyond.status, 416)
        XCTAssertEqual(beyond.header("Content-Range"), "bytes */300000")

        // If-Range: a range of the version the client has; another version gets the whole file.
        let same = try api.request("GET", "/downloads/\(id)/file", headers: ["Range": "bytes=0-9", "If-Range": tag])
        XCTAssertEqual(same.status, 206)
        let other = try api.request(
            "GET", "/downloads/\(id)/file", headers: ["Range": "bytes=0-9", "If-Range": "\"x\""])
        XCTAssertEqual(other.status, 200)
        XCTAssertEqual(other.body.count, 300_000)
        let cached = try api.request("GET", "/downloads/\(id)/file", headers: ["If-None-Match": tag])
        XCTAssertEqual(cached.status, 304)
        let head = try api.request("HEAD", "/downloads/\(id)/file")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "300000")
        XCTAssertEqual(head.body.count, 0)
        // curl resumes a cut download of it with a range, as a browser would.
        let copy = sandbox.file("copy.bin")
        try data.prefix(123_456).write(to: URL(fileURLWithPath: copy))
        _ = try runCommand("/usr/bin/curl", ["-sSf", "-C", "-", "-o", copy, haul.baseURL + "/downloads/\(id)/file"])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: copy)), data)
    }

    func testOnlyAFinishedFileThatIsStillHaulsIsServed() throws {
        let paused = try add(["url": originURL("later.bin"), "start_paused": true])
        XCTAssertEqual(try api.get("/downloads/\(paused)/file").status, 409)
        XCTAssertEqual(try api.get("/downloads/nosuchid/file").status, 404)

        let (gone, _) = try finished("gone.bin", size: 1000)
        try FileManager.default.removeItem(atPath: sandbox.file("downloads/gone.bin"))
        XCTAssertEqual(try api.get("/downloads/\(gone)/file").status, 410)

        // A link planted where the file was is not followed; nor is a hard link to another file taken for it.
        let (linked, _) = try finished("linked.bin", size: 1000)
        try FileManager.default.removeItem(atPath: sandbox.file("downloads/linked.bin"))
        try FileManager.default.createSymbolicLink(
            atPath: sandbox.file("downloads/linked.bin"),
            withDestinationPath: "/etc/passwd")
        let refused = try api.get("/downloads/\(linked)/file")
        XCTAssertEqual(refused.status, 409, refused.text)
        XCTAssertFalse(refused.text.contains("root:"))
        let (hard, _) = try finished("hard.bin", size: 1000)
        try FileManager.default.removeItem(atPath: sandbox.file("downloads/hard.bin"))
        try FileManager.default.linkItem(
            atPath: sandbox.file("www/hard.bin"), toPath: sandbox.file("downloads/hard.bin"))
        XCTAssertEqual(try api.get("/downloads/\(hard)/file").status, 409)

        // Another regular file of Haul's own user, one link, the same size, put in its place (a new inode): not
        // the download's file, whatever its name.
        let (replaced, _) = try finished("replaced.bin", size: 1000)
        let impostor = Data(repeating: 0x41, count: 1000)
        try impostor.write(to: URL(fileURLWithPath: sandbox.file("replaced.tmp")))
        XCTAssertEqual(rename(sandbox.file("replaced.tmp"), sandbox.file("downloads/replaced.bin")), 0)
        let swapped = try api.get("/downloads/\(replaced)/file")
        XCTAssertEqual(swapped.status, 409, swapped.text)
        XCTAssertNotEqual(swapped.body, impostor)
        XCTAssertTrue(swapped.text.contains("no longer the one this download wrote"), swapped.text)
        // The same inode grown or cut in place is not the file either.
        let (grown, grownData) = try finished("grown.bin", size: 1000)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: sandbox.file("downloads/grown.bin")))
        handle.seekToEndOfFile()
        handle.write(Data("appended".utf8))
        handle.closeFile()
        XCTAssertEqual(try api.get("/downloads/\(grown)/file").status, 409)
        XCTAssertEqual(truncate(sandbox.file("downloads/grown.bin"), off_t(grownData.count)), 0)
        let restored = try api.get("/downloads/\(grown)/file")
        XCTAssertEqual(restored.status, 200, "back as it was: the same inode and size")
        // And it stays recorded across a restart.
        haul.stop()
        try startHaul()
        XCTAssertEqual(try api.get("/downloads/\(replaced)/file").status, 409)
        XCTAssertEqual(try api.get("/downloads/\(grown)/file").status, 200)
    }
}

/// With a token, a browser's link carries a ticket for its one path (or, from a script, the token itself).
final class FileTokenTests: HaulTestCase {
    let token = "file-test-token-abcdefgh"
    override var serveArguments: [String] { super.serveArguments + ["--token", token] }

    func testALinkCarriesTheTokenInItsQuery() throws {
        try sandbox.makeRandomFile("www/t.bin", size: 5000)
        let reply = try api.request(
            "POST", "/downloads", json: ["url": originURL("t.bin")],
            headers: ["Authorization": "Bearer \(token)"])
        let id = try XCTUnwrap(reply.json["id"] as? String)
        try waitFor("completion") {
            try api.request("GET", "/downloads/\(id)", headers: ["Authorization": "Bearer \(token)"])
                .json["state"] as? String == "completed"
        }
        XCTAssertEqual(try api.get("/downloads/\(id)/file").status, 401)
        let linked = try api.get("/downloads/\(id)/file?access_token=\(token)")
        XCTAssertEqual(linked.status, 200)
        XCTAssertEqual(linked.body.count, 5000)
        XCTAssertEqual(try api.get("/downloads/\(id)/file?access_token=wrong-token-0123456").status, 401)

        let issued = try api.request(
            "POST", "/tickets", json: ["path": "/downloads/\(id)/file"],
            headers: ["Authorization": "Bearer \(token)"])
        XCTAssertEqual(issued.status, 201, issued.text)
        let url = try XCTUnwrap(issued.json["url"] as? String)
        let opened = try api.get(url)
        XCTAssertEqual(opened.status, 200)
        XCTAssertEqual(opened.body.count, 5000)
        XCTAssertEqual(opened.header("Referrer-Policy"), "no-referrer")
        XCTAssertFalse(url.contains(token))
    }
}
