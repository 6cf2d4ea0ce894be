import FoundationEssentials
import XCTest
@testable import HaulCore

/// Admission as a table: each row is a batch of requests and what the server holds, and what each request becomes
/// (a new download, the one already fetching that file, or why not), with the new downloads as they are built.
final class AdmissionPlanTests: XCTestCase {
    private struct Row {
        var name: String
        var requests: [NewDownload]
        var context = AdmissionContext()
        /// Each request's outcome: "new", "same ID", "same as new N", or "refused" and the words that say why.
        var expected: [String]
        /// Checks the new downloads.
        var fresh: ([Download]) -> Void = { _ in }
    }

    private static let quotaToken = AccessToken(
        id: "tok1", name: "alice", scope: .add, expiresAt: nil,
        createdAt: Date(), root: "alice", quotaBytes: 1000)

    private static func request(_ url: String, _ build: (inout NewDownload) -> Void = { _ in }) -> NewDownload {
        var request = NewDownload(url: url)
        build(&request)
        return request
    }

    private static func stored(_ id: String, _ url: String, directory: String = "", owner: String? = nil) -> Download {
        var download = Download(
            id: id, sequence: 1, url: url, headers: [], requestedFilename: nil,
            directory: directory, state: .downloading, connections: 4, priority: 0, maxSpeed: nil,
            createdAt: Date())
        download.owner = owner
        return download
    }

    private static func holding(_ downloads: [Download]) -> AdmissionContext {
        var context = AdmissionContext()
        context.existing = { url, directory, _ in downloads.first { $0.url == url && $0.directory == directory } }
        context.idTaken = { id in downloads.contains { $0.id == id } }
        return context
    }

    private var rows: [Row] {
        let films = Category(name: "films", directory: "films", connections: 3, priority: 2)
        var withFilms = AdmissionContext()
        withFilms.categories = ["films": films]
        withFilms.nextSequence = 41
        var elsewhere = AdmissionContext()
        elsewhere.categories = ["shared": Category(name: "shared", directory: "shared")]
        var completedOutside = AdmissionContext()
        completedOutside.categories = ["tv": Category(name: "tv", directory: "alice/tv", completedDirectory: "done")]
        var small = AdmissionContext()
        small.spaceRefusal = { $0 > 1000 ? DownloadError(.insufficientSpace, "not enough space") : nil }
        var capacityOne = AdmissionContext()
        capacityOne.capacity = 1
        var halfUsed = AdmissionContext()
        halfUsed.usage = { $0 == "tok1" ? 500 : 0 }
        let deep = (1...FileName.maxDepth + 1).map { "d\($0)" }.joined(separator: "/")
        return [
            Row(
                name: "a new download takes the server's defaults and the next sequence number",
                requests: [Self.request("http://o/a")], expected: ["new"]
            ) { fresh in
                XCTAssertEqual(fresh.first?.connections, 8)
                XCTAssertEqual(fresh.first?.state, .queued)
                XCTAssertEqual(fresh.first?.sequence, 1)
            },
            Row(
                name: "a category's folder holds the download's, its defaults are the download's",
                requests: [
                    Self.request("http://o/a") {
                        $0.category = "films"; $0.directory = "2024"
                    },
                    Self.request("http://o/b") {
                        $0.category = "films"; $0.connections = 1; $0.startPaused = true
                    },
                ],
                context: withFilms, expected: ["new", "new"]
            ) { fresh in
                XCTAssertEqual(fresh.map(\.directory), ["films/2024", "films"])
                XCTAssertEqual(fresh.map(\.connections), [3, 1])
                XCTAssertEqual(fresh.map(\.priority), [2, 2])
                XCTAssertEqual(fresh.map(\.sequence), [41, 42])
                XCTAssertEqual(fresh.map(\.state), [.queued, .paused])
            },
            Row(
                name: "a category is made before it is used",
                requests: [Self.request("http://o/a") { $0.category = "flims" }],
                expected: ["refused no category 'flims'"]),
            Row(
                name: "a token's root holds its downloads",
                requests: [
                    Self.request("http://o/a") {
                        $0.owner = Self.quotaToken; $0.directory = "x"
                    }
                ],
                expected: ["new"]
            ) { fresh in
                XCTAssertEqual(fresh.first?.directory, "alice/x")
                XCTAssertEqual(fresh.first?.owner, "tok1")
            },
            Row(
                name: "a category outside the token's root is not the token's to use",
                requests: [
                    Self.request("http://o/a") {
                        $0.owner = Self.quotaToken; $0.category = "shared"
                    }
                ],
                context: elsewhere, expected: ["refused outside the token's root"]),
            Row(
                name: "nor is a completed folder outside it",
                requests: [
                    Self.request("http://o/a") {
                        $0.owner = Self.quotaToken; $0.category = "tv"
                    }
                ],
                context: completedOutside, expected: ["refused completed folder 'done'"]),
            Row(
                name: "folders too deep are refused",
                requests: [Self.request("http://o/a") { $0.directory = deep }],
                expected: ["refused at most \(FileName.maxDepth)"]),
            Row(
                name: "the same file again is the download fetching it",
                requests: [Self.request("http://o/a")],
                context: Self.holding([Self.stored("d1", "http://o/a")]), expected: ["same d1"]),
            Row(
                name: "with options that cannot change, refused by name",
                requests: [Self.request("http://o/a") { $0.checksum = "sha256=" + String(repeating: "0", count: 64) }],
                context: Self.holding([Self.stored("d1", "http://o/a")]), expected: ["refused checksum"]),
            Row(
                name: "another token's download under a shared root is not the answer",
                requests: [Self.request("http://o/a") { $0.owner = Self.quotaToken }],
                context: Self.holding([Self.stored("d1", "http://o/a", directory: "alice", owner: "tok2")]),
                expected: ["new"]),
            Row(
                name: "the same file twice in one batch is one download",
                requests: [Self.request("http://o/a"), Self.request("http://o/a"), Self.request("http://o/b")],
                expected: ["new", "same as new 0", "new"]),
            Row(
                name: "past the capacity the rest are refused",
                requests: [Self.request("http://o/a"), Self.request("http://o/b")],
                context: capacityOne, expected: ["new", "refused too many"]),
            Row(
                name: "sizes of one batch add up against the free space",
                requests: [
                    Self.request("http://o/a") { $0.expectedBytes = 600 },
                    Self.request("http://o/b") { $0.expectedBytes = 600 },
                    Self.request("http://o/c"),
                ],
                context: small, expected: ["new", "refused not enough space", "new"]),
            Row(
                name: "an id already taken, stored or earlier in the batch, is refused",
                requests: [
                    Self.request("http://o/a") { $0.id = "d1" }, Self.request("http://o/b") { $0.id = "n1" },
                    Self.request("http://o/c") { $0.id = "n1" },
                ],
                context: Self.holding([Self.stored("d1", "http://o/x")]),
                expected: ["refused the id d1 is taken", "new", "refused the id n1 is taken"]
            ) { fresh in
                XCTAssertEqual(fresh.map(\.id), ["n1"])
            },
            Row(
                name: "a token's quota counts what it holds and what the batch added before",
                requests: [
                    Self.request("http://o/a") {
                        $0.owner = Self.quotaToken; $0.expectedBytes = 400
                    },
                    Self.request("http://o/b") {
                        $0.owner = Self.quotaToken; $0.expectedBytes = 200
                    },
                ],
                context: halfUsed, expected: ["new", "refused holds 900 bytes of its 1000 bytes quota"]),
        ]
    }

    private func describe(_ outcome: AdmissionPlan.Outcome) -> String {
        switch outcome {
        case .new: return "new"
        case .same(let id): return "same \(id)"
        case .sameAsNew(let index): return "same as new \(index)"
        case .refused(let error):
            switch error {
            case .conflict(let message), .notOwner(let message): return "refused " + message
            case .invalid(_, let message): return "refused " + message
            case .insufficientStorage(let error): return "refused " + error.message
            case .tooMany: return "refused too many"
            default: return "refused \(error)"
            }
        }
    }

    func testEachRowPlansAsItSays() {
        for row in rows {
            let plan = AdmissionPlan(row.requests, row.context)
            let got = plan.outcomes.map(describe)
            XCTAssertEqual(got.count, row.expected.count, row.name)
            for (outcome, expected) in zip(got, row.expected) {
                if expected.hasPrefix("refused ") {
                    XCTAssertTrue(
                        outcome.hasPrefix("refused ") && outcome.contains(expected.dropFirst(8)),
                        "\(row.name): \(outcome) does not say '\(expected)'")
                } else {
                    XCTAssertEqual(outcome, expected, row.name)
                }
            }
            XCTAssertEqual(plan.fresh.count, got.filter { $0 == "new" }.count, row.name)
            XCTAssertEqual(plan.refusesAny, got.contains { $0.hasPrefix("refused") }, row.name)
            row.fresh(plan.fresh)
        }
    }

    func testNewIDsAreTheContextsAndTheQuotaTokensAreKnownAfter() {
        var context = AdmissionContext()
        var next = 0
        context.newID = {
            next += 1
            return "id\(next)"
        }
        let plan = AdmissionPlan(
            [Self.request("http://o/a") { $0.owner = Self.quotaToken }, Self.request("http://o/b")],
            context)
        XCTAssertEqual(plan.fresh.map(\.id), ["id1", "id2"])
        XCTAssertEqual(plan.owners.map(\.id), ["tok1"], "a token with a quota is remembered, its limits with it")
    }
}
