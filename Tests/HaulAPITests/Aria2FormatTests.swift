@testable import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The aria2 front's translations, as tables: pieces from segments, GIDs from ids, aria2's option values, error
/// codes, WebSocket frames.
final class Aria2FormatTests: XCTestCase {
    func testTheBitfieldSetsAPieceOnlyWhenEveryByteOfItIsIn() {
        let mib: Int64 = 1 << 20
        let total = 10 * mib + 5
        // Pieces 0-2 whole, 3 half, 4-7 whole across two segments meeting inside piece 5, 8 empty, 10 (5 bytes) whole.
        let segments = [
            Segment(start: 0, end: 4 * mib - 1, received: 3 * mib + mib / 2),
            Segment(start: 4 * mib, end: 5 * mib + 99, received: mib + 100),
            Segment(start: 5 * mib + 100, end: 9 * mib - 1, received: 3 * mib - 100),
            Segment(start: 9 * mib, end: 10 * mib - 1, received: 0),
            Segment(start: 10 * mib, end: total - 1, received: 5),
        ]
        // 1110 1111 | 0010 0000: pieces 0, 1, 2, 4, 5, 6, 7 and 10.
        XCTAssertEqual(Aria2Status.bitfield(segments, total: total), "ef20")
        XCTAssertEqual(Aria2Status.bitfield([Segment(start: 0, end: 99, received: 100)], total: 100), "80")
        XCTAssertEqual(Aria2Status.bitfield([Segment(start: 0, end: 99, received: 99)], total: 100), "00")
    }

    func testAGIDIsSixteenHexDigitsOfTheIdAndFoundAgain() {
        let ids = (0..<1000).map { _ in HaulID.random() }
        let gids = ids.map(Aria2GIDs.gid(of:))
        XCTAssertTrue(gids.allSatisfy { Aria2GIDs.isGID($0) && $0 == $0.lowercased() })
        XCTAssertEqual(Set(gids).count, ids.count)
        XCTAssertEqual(ids.map(Aria2GIDs.gid(of:)), gids, "the same id, the same GID, in every process")
        let index = Aria2GIDs()
        XCTAssertEqual(index.id(of: gids[500].uppercased(), count: ids.count, now: 0) { ids }, ids[500])
        XCTAssertNil(
            index.id(of: "0123456789abcdef", count: ids.count, now: 0.5) {
                XCTFail("walked again"); return []
            })
        for gid in ["0123456789abcdef", "ffffffffffffffff", "8000000000000001"] {
            let made = try? XCTUnwrap(Aria2GIDs.id(forGID: gid))
            XCTAssertEqual(made?.utf8.count, 15)
            XCTAssertEqual(made.map(Aria2GIDs.gid(of:)), gid, "an id made for a GID has that GID")
        }
        XCTAssertFalse(Aria2GIDs.isGID("0123456789abcdeg"))
        XCTAssertFalse(Aria2GIDs.isGID("0123"))
    }

    func testAria2sOptionValuesBecomeHauls() throws {
        XCTAssertEqual(Aria2Options.bytes("1M"), 1 << 20)
        XCTAssertEqual(Aria2Options.bytes("500K"), 500 << 10)
        XCTAssertEqual(Aria2Options.bytes("0"), 0)
        XCTAssertNil(Aria2Options.bytes("-1"))
        XCTAssertNil(Aria2Options.bytes("1X"))
        XCTAssertEqual(Aria2Options.checksum("SHA-256=ABCDEF"), "sha256:abcdef")
        XCTAssertEqual(Aria2Options.checksum("md5=00ff"), "md5:00ff")
        XCTAssertEqual(try Aria2Options.directory("/srv/dl", root: "/srv/dl"), "")
        XCTAssertEqual(try Aria2Options.directory("/srv/dl/films/new", root: "/srv/dl/"), "films/new")
        XCTAssertEqual(try Aria2Options.directory("films", root: "/srv/dl"), "films")
        XCTAssertThrowsError(try Aria2Options.directory("/srv/dl2/x", root: "/srv/dl"))
        XCTAssertThrowsError(try Aria2Options.directory("/etc", root: "/srv/dl"))
        let members = try Aria2Options.downloadMembers(
            [
                ("split", .string("16")), ("max-connection-per-server", .string("2")),
                ("max-download-limit", .string("2M")), ("pause", .string("true")),
                ("header", .array([.string("Cookie: a=1")])),
                ("bt-seed-unverified", .string("true")),
            ],
            root: "/srv/dl", sources: 3)
        let byName = Dictionary(members, uniquingKeysWith: { $1 })
        XCTAssertEqual(byName["connections"], .number(6), "min(split, per-server x sources)")
        XCTAssertEqual(byName["max_speed"], .number(Double(2 << 20)))
        XCTAssertEqual(byName["start_paused"], .bool(true))
        XCTAssertEqual(byName["headers"], .object([("Cookie", .string("a=1"))]))
        XCTAssertEqual(members.count, 4, "an option Haul has not is ignored")
        for refused in ["on-download-complete", "log", "rpc-secret", "input-file", "save-session"] {
            XCTAssertThrowsError(try Aria2Options.downloadMembers([(refused, .string("/x"))], root: "/r", sources: 1))
        }
    }

    /// aria2's in-order piece selector is Haul's sequential download; its other selectors spread the connections.
    func testTheInOrderPieceSelectorIsSequential() throws {
        func sequential(_ selector: String) throws -> JSONValue? {
            let members = try Aria2Options.downloadMembers(
                [("stream-piece-selector", .string(selector))], root: "/r", sources: 1)
            return Dictionary(members, uniquingKeysWith: { $1 })["sequential"]
        }
        XCTAssertEqual(try sequential("inorder"), .bool(true))
        XCTAssertEqual(try sequential("geom"), .bool(false))
        XCTAssertThrowsError(try sequential("backwards"))
    }

    func testErrorCodesFollowAria2sExitStatusTable() {
        XCTAssertEqual(Aria2Status.errorCode(.http(404)), 3)
        XCTAssertEqual(Aria2Status.errorCode(.ftp(550)), 3)
        XCTAssertEqual(Aria2Status.errorCode(.http(503)), 29)
        XCTAssertEqual(Aria2Status.errorCode(.http(400)), 22)
        XCTAssertEqual(Aria2Status.errorCode(.checksumMismatch), 32)
        XCTAssertEqual(Aria2Status.errorCode(.dnsFailed), 19)
        XCTAssertEqual(Aria2Status.errorCode(.diskFull), 9)
        XCTAssertEqual(Aria2Status.errorCode(.loginFailed), 24)
        XCTAssertEqual(Aria2Status.errorCode(.ftp(530)), 21)
        XCTAssertEqual(Aria2Status.errorCode(.internalError), 1)
    }

    func testWebSocketFramesAreReadAcrossAnySplit() {
        let mask: [UInt8] = [1, 2, 3, 4]
        func masked(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
            [(fin ? 0x80 : 0) | opcode, 0x80 | UInt8(payload.count)] + mask
                + payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
        }
        let bytes =
            masked(0x1, Array("hel".utf8), fin: false) + masked(0x9, [7]) + masked(0x0, Array("lo".utf8))
            + masked(0x8, [0x03, 0xE8])
        // Fed one byte at a time or whole, the same outputs.
        for step in [1, 3, bytes.count] {
            var frames = WebSocketFrames()
            var outputs: [WebSocketFrames.Output] = []
            var start = 0
            while start < bytes.count {
                let end = min(bytes.count, start + step)
                outputs += bytes[start..<end].withUnsafeBytes { frames.feed($0) }
                start = end
            }
            XCTAssertEqual(outputs, [.ping([7]), .text("hello"), .close(1000)], "step \(step)")
        }
        var frames = WebSocketFrames(maxMessage: 4)
        XCTAssertEqual(
            masked(0x1, Array("hello".utf8)).withUnsafeBytes { frames.feed($0) }.first,
            .fail(1009, "message too large"))
        XCTAssertEqual(WebSocketFrames.accept(key: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        XCTAssertEqual(
            WebSocketFrames.frame(opcode: 1, [UInt8](repeating: 0, count: 300)).prefix(4), [0x81, 126, 1, 44])
    }
}
