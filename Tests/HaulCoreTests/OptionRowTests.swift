import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// Each row of the option table, walked from a request to the resource: a value of its kind is taken, one of
/// another JSON type is refused naming the field, the new download carries it, the store keeps it, and the resource
/// shows it back (or, for a secret or a choice made once, never does).
final class OptionRowTests: XCTestCase {
    /// A value each row takes, and what the download then holds, as the resource would show it.
    private func sample(_ option: DownloadOption) -> JSONValue {
        switch option.kind {
        case .integer(let range): return JSONValue(range.upperBound)
        case .bytes: return JSONValue(Int64(123_456))
        case .decimal: return .number(1.5)
        case .boolean: return .bool(true)
        case .headers: return .object([("X-Sample", .string("1"))])
        case .text:
            switch option.name {
            case "filename": return .string("sample.bin")
            case "directory": return .string("sub/dir")
            case "category": return .string("films")
            case "checksum": return .string("sha256:" + String(repeating: "ab", count: 32))
            case "proxy": return .string("socks5h://proxy.test:1080")
            case "username": return .string("ann")
            case "password": return .string("s3cret")
            case "cookies": return .string("a=1; b=2")
            case "user_agent": return .string("Sample/1")
            case "referer": return .string("https://from.example/")
            case "host_key": return .string("SHA256:" + String(repeating: "A", count: 43))
            case "kind": return .string("hls")
            case "variant": return .string("720")
            case "files": return .string("1,3-4,*.mkv")
            case "tags": return .string("hd,tv")
            default:
                XCTFail("no sample for \(option.name): add one here")
                return .null
            }
        }
    }

    func testEveryRowTakesItsValueRefusesAnotherTypeAndShowsWhatItTook() throws {
        let engine = try makeEngine(fetcher: SilentFetcher(), clock: ManualClock())
        _ = try engine.categories.put(Category(name: "films", directory: "films"))
        var members: [(String, JSONValue)] = []
        for option in DownloadOptions.all {
            var request = NewDownload(url: "http://origin.test/x")
            var problems: [FieldProblem] = []
            option.apply(option.key, sample(option), &request, &problems)
            XCTAssertTrue(problems.isEmpty, "\(option.name): \(problems)")
            // A value of another JSON type: a string for everything but text, a number for text.
            let wrong: JSONValue = option.kind == .text ? JSONValue(Int64(1)) : .string("x")
            option.apply(option.key, wrong, &request, &problems)
            XCTAssertEqual(problems.map(\.field), [option.name], "\(option.name) refuses \(wrong)")
            members.append((option.name, sample(option)))
        }
        var request = NewDownload(url: "http://origin.test/x")
        XCTAssertTrue(DownloadOptions.apply(members, to: &request).isEmpty)
        let added = try engine.add(request).snapshot.download
        // What the store keeps is what was added, every column.
        let stored = try XCTUnwrap(try engine.store.load(id: added.id))
        XCTAssertEqual(stored.headers, [HeaderField(name: "X-Sample", value: "1")])
        XCTAssertEqual(stored.directory, "films/sub/dir", "under the category's folder")
        // Times are stored as seconds in a double: equal to the microsecond, not to the last bit.
        XCTAssertEqual(stored.createdAt.timeIntervalSince1970, added.createdAt.timeIntervalSince1970, accuracy: 1e-6)
        var comparable = stored
        comparable.createdAt = added.createdAt
        comparable.updatedAt = added.updatedAt
        XCTAssertEqual(comparable, added)
        var writer = JSONWriter()
        writer.object { DownloadOptions.show(stored, into: &$0) }
        guard case .object(let resource) = try JSONValue.parse(writer.bytes) else { return XCTFail("not an object") }
        let shown = Dictionary(uniqueKeysWithValues: resource)
        for option in DownloadOptions.all {
            XCTAssertEqual(shown[option.name] != nil, option.shown, option.name)
            guard let value = shown[option.name] else { continue }
            XCTAssertEqual(value, sample(option), "\(option.name) is shown as it was given")
        }
        XCTAssertEqual(stored.state, .paused, "start_paused")
    }

    func testARowNamesTheColumnItHolds() {
        let columns = Set(DownloadColumn.all.map(\.name))
        XCTAssertEqual(columns.count, DownloadColumn.all.count, "a column is held once")
        for option in DownloadOptions.all {
            XCTAssertTrue(columns.contains(option.column), option.name)
            if let storage = option.storage { XCTAssertEqual(storage.name, option.column, option.name) }
        }
    }
}
