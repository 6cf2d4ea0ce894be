import Foundation
import HaulLoop
import HaulTestSupport
import XCTest
@testable import HaulCore

/// A resting download is held packed: every field comes back as it was, a read never keeps it unpacked, a change
/// keeps it packed while the machine rests and unpacks it for good once the machine runs, and the registry's walks
/// read packed and unpacked downloads alike.
final class PackedDownloadTests: XCTestCase {
    private func plain(
        _ id: String = "5sbz0abcdefghjk", sequence: Int64 = 7, state: DownloadState = .paused
    )
        -> Download
    {
        Download(
            id: id, sequence: sequence, url: "http://127.0.0.1:9/m/12/3456.bin", headers: [],
            requestedFilename: nil, directory: "", state: state, connections: 4, priority: 0, maxSpeed: nil,
            createdAt: Date(timeIntervalSince1970: 1_764_000_000.123_456))
    }

    /// Every field away from its default, the awkward values included.
    private func full() -> Download {
        var d = plain()
        d.url = "https://user@例え.jp/パス/file name.bin?q=1&r=é"
        d.headers = [HeaderField(name: "Authorization", value: "Bearer x"), HeaderField(name: "X-Empty", value: "")]
        d.requestedFilename = ""
        d.directory = "tv/shows"
        d.filename = "file name (1).bin"
        d.finalURL = "https://cdn.test/final"
        d.segments = [
            Segment(start: 0, end: 99, received: 100), Segment(start: 100, end: nil, received: 7),
            Segment(start: Int64.max - 1, end: Int64.max, received: 0),
        ]
        d.journal = [Segment(start: 0, end: 99, received: 64)]
        var mirror = Mirror(url: "http://mirror.test/a")
        mirror.state = .dropped
        mirror.reason = "size differs"
        mirror.etag = "\"m\""
        mirror.receivedBytes = 1 << 40
        mirror.errors = 2
        d.mirrors = [mirror, Mirror(url: "ftp://other.test/b")]
        d.category = "tv"
        d.tags = "a,b"
        d.etag = "\"abc\""
        d.lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"
        d.contentType = "application/octet-stream"
        d.node = "node-1"
        d.owner = "tok1"
        d.ownerName = "sonarr"
        d.completedDirectory = "done"
        d.connections = 16
        d.priority = -3
        d.attempts = 5
        d.fence = Int64.min
        d.updatedAt = Date(timeIntervalSince1970: -1.5)
        d.totalBytes = 0
        d.state = .failed
        d.queueRank = -42
        d.kind = .hls
        d.maxSpeed = Int64.max
        d.insecure = true
        d.startedAt = Date(timeIntervalSince1970: 1e9)
        d.sequential = true
        d.completedAt = Date.distantFuture
        d.firstLast = true
        d.fileStamp = FileStamp(device: UInt64.max, inode: 1, size: 0)
        d.acceptsRanges = true
        d.moved = true
        d.moveSettled = true
        d.hookPending = true
        d.error = DownloadError(.http(404), "not found")
        d.checksum = "sha256:00"
        return d
    }

    func testEveryFieldComesBackAsItWasPacked() {
        for download in [plain(), full()] {
            let packed = PackedDownload(download)
            XCTAssertEqual(packed.download, download)
            XCTAssertEqual(packed.state, download.state)
        }
        // The final URL the same as the URL is kept once, and read back as itself; another is kept apart.
        var same = plain()
        same.finalURL = same.url
        XCTAssertEqual(PackedDownload(same).download.finalURL, same.url)
        XCTAssertLessThan(PackedDownload(same).packedSize, PackedDownload(full()).packedSize)
        // A paused download that never started: its id and URL (50 bytes) and under fifty more, sixteen of them
        // its two times.
        XCTAssertLessThan(PackedDownload(plain()).packedSize, 100)
    }

    func testAReadLeavesABoxPackedAndAChangeUnpacksItOnlyOnceItsMachineRuns() {
        let download = full()
        let box = MachineBox(DownloadMachine(download: download, settings: MachineSettings()))
        box.pack()
        XCTAssertTrue(box.isPacked)
        XCTAssertEqual(box.machine.download, download)
        XCTAssertEqual(box.download, download)
        XCTAssertEqual(box.state, .failed)
        XCTAssertEqual(box.snapshot(clock: ManualClock()).download, download)
        XCTAssertTrue(box.isPacked, "reads unpack nothing for good")
        // The file's name, as an adopted part file is checked against every download's.
        XCTAssertTrue(box.names("file name (1).bin", in: "tv/shows"))
        XCTAssertFalse(box.names("file name (1).bin", in: "tv"))
        XCTAssertFalse(box.names("file name.bin", in: "tv/shows"))
        XCTAssertFalse(MachineBox(DownloadMachine(download: plain(), settings: MachineSettings())).names("", in: ""))

        // A change of its download alone: the machine still rests, so it is packed again, with the change.
        box.machine.download.tags = "c"
        XCTAssertTrue(box.isPacked)
        XCTAssertEqual(box.download.tags, "c")
        XCTAssertEqual(box.download.error, download.error)

        // A change of its run while idle: packed again, with its run beside it.
        box.machine.restarts = 1
        XCTAssertTrue(box.isPacked)
        XCTAssertEqual(box.download.tags, "c")
        XCTAssertEqual(box.machine.restarts, 1)
        XCTAssertTrue(box.names("file name (1).bin", in: "tv/shows"))
        XCTAssertFalse(box.names("file name (1).bin", in: ""))

        // Once it runs, it stays unpacked.
        box.machine.phase = .transferring
        XCTAssertFalse(box.isPacked)
        box.pack()
        XCTAssertFalse(box.isPacked)
        XCTAssertFalse(box.settleRun(clock: ManualClock()))

        // A completed download whose runner is gone: its run is dropped and it is packed again; a failed or paused
        // one keeps its run (its last error, what may go on) and is packed beside it; the time of the last write
        // goes into `updatedAt` (as a snapshot showed it).
        var completed = plain(state: .completed)
        completed.totalBytes = 9
        completed.segments = [Segment(start: 0, end: 8, received: 9)]
        let finished = MachineBox(DownloadMachine(download: completed, settings: MachineSettings()))
        finished.machine.restarts = 1
        finished.lastWriteAt = 3
        finished.pack()
        XCTAssertFalse(finished.isPacked, "a write's time is pending")
        let clock = ManualClock()
        completed.updatedAt = finished.snapshot(clock: clock).download.updatedAt
        XCTAssertTrue(finished.settleRun(clock: clock))
        finished.pack()
        XCTAssertTrue(finished.isPacked)
        XCTAssertEqual(finished.download, completed)
        XCTAssertEqual(finished.machine.restarts, 0)
        for state in [DownloadState.failed, .paused] {
            let clock = ManualClock()
            let ran = MachineBox(DownloadMachine(download: plain(state: state), settings: MachineSettings()))
            ran.machine.restarts = 2
            ran.lastWriteAt = clock.now + 5
            let shown = ran.snapshot(clock: clock).download.updatedAt
            XCTAssertTrue(ran.settleRun(clock: clock))
            ran.pack()
            XCTAssertTrue(ran.isPacked, "\(state)")
            XCTAssertEqual(ran.machine.restarts, 2, "\(state)")
            XCTAssertEqual(ran.download.updatedAt, shown, "\(state)")
            XCTAssertEqual(ran.snapshot(clock: clock).download.updatedAt, shown, "\(state)")
        }

        // A download whose file is being read as it arrives is not packed.
        let read = MachineBox(DownloadMachine(download: plain(), settings: MachineSettings()))
        read.readers = 1
        read.pack()
        XCTAssertFalse(read.isPacked)
    }

    func testTheRegistryPacksWhatItHoldsAndItsWalksReadThemAll() {
        let registry = DownloadRegistry()
        let states: [DownloadState] = [.paused, .completed, .queued, .failed, .paused]
        for (index, state) in states.enumerated() {
            var download = plain("id\(index)", sequence: Int64(index + 1), state: state)
            download.segments = [Segment(start: 0, end: nil, received: Int64(index))]
            let box = MachineBox(DownloadMachine(download: download, settings: MachineSettings()))
            registry.insert(box, holding: download)
        }
        XCTAssertFalse(registry.machines.values.contains(where: \.isPacked), "the newest are read again at once")
        registry.packWaiting()
        XCTAssertTrue(registry.machines.values.allSatisfy(\.isPacked))
        XCTAssertEqual(registry.ids(where: DownloadFilter(states: [.paused])), ["id0", "id4"])
        XCTAssertEqual(registry.page(after: 1, limit: 2).ids, ["id1", "id2"])
        XCTAssertEqual(
            registry.page(
                by: .size, descending: false, offset: 0, limit: 10,
                where: DownloadFilter(states: [.paused, .completed, .failed])
            ).ids,
            ["id0", "id1", "id3", "id4"])
        XCTAssertEqual(registry.receivedTotal, 10)
        XCTAssertEqual(registry.download(fetching: "http://127.0.0.1:9/m/12/3456.bin", into: "", as: nil), "id0")

        // A change through the registry's box is indexed as before.
        let before = registry["id2"]!.download
        registry["id2"]!.machine.download.priority = 3
        registry.changed("id2", from: before)
        XCTAssertEqual(registry["id2"]?.download.priority, 3)
        XCTAssertTrue(registry["id2"]!.isPacked)
        XCTAssertEqual(registry.remove("id1")?.state, .completed)
        XCTAssertEqual(registry.stateCounts[.completed], 0)
    }

    func testTheNewestDownloadsWaitToBePackedAndTheOlderOnesDoNot() {
        let registry = DownloadRegistry()
        let limit = DownloadRegistry.unpackedLimit
        var boxes: [MachineBox] = []
        for index in 0..<(2 * limit + 10) {
            let download = plain("d\(index)", sequence: Int64(index + 1))
            boxes.append(MachineBox(DownloadMachine(download: download, settings: MachineSettings())))
            registry.insert(boxes[index], holding: download)
        }
        // Once twice the limit came, the older half was packed; a running one among them is left as it is.
        XCTAssertTrue(boxes[..<limit].allSatisfy(\.isPacked))
        XCTAssertFalse(boxes[limit...].contains(where: \.isPacked))
        boxes[limit].machine.phase = .transferring
        registry.packWaiting()
        XCTAssertFalse(boxes[limit].isPacked)
        XCTAssertTrue(boxes[(limit + 1)...].allSatisfy(\.isPacked))
        XCTAssertEqual(
            registry.page(after: Int64(limit - 2), limit: 3).ids, ["d\(limit - 2)", "d\(limit - 1)", "d\(limit)"])

        // A client's read unpacks one for the reads to come; twice the limit of reads later it is packed again
        // (d1024, never packed, is not counted).
        XCTAssertTrue(registry.reading("d0")?.download == plain("d0", sequence: 1))
        XCTAssertFalse(boxes[0].isPacked)
        for index in 1...(2 * limit) { _ = registry.reading("d\(index)") }
        XCTAssertTrue(boxes[0].isPacked)
        XCTAssertFalse(boxes[2 * limit - 1].isPacked)
    }

    func testFiltersAndSortsReadFromTheBytesAnswerAsTheDownloadItselfDoes() {
        var downloads: [Download] = [plain(), full()]
        var named = plain("abcdefghjkmnpqr", sequence: 9, state: .completed)
        named.filename = "Season.1.Episode.7.MKV"
        named.category = "tv"
        named.owner = "tok1"
        named.totalBytes = 700
        named.segments = [Segment(start: 0, end: 699, received: 700)]
        downloads.append(named)
        var credentials = plain("zz0000000000000", sequence: 10, state: .queued)
        credentials.url = "http://user:secret7@host.test/file7.bin"
        credentials.queueRank = 5
        credentials.priority = 2
        downloads.append(credentials)
        var wide = plain("k7", sequence: 11, state: .failed)
        wide.requestedFilename = "Ärger KELVIN \u{212A}.bin"
        downloads.append(wide)
        var torrent = plain("t1", sequence: 12, state: .paused)
        torrent.kind = .torrent
        torrent.url = "magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567&dn=Seven"
        downloads.append(torrent)

        let filters: [DownloadFilter] =
            [
                DownloadFilter(), DownloadFilter(states: [.paused]), DownloadFilter(states: [.completed, .queued]),
                DownloadFilter(search: "7"), DownloadFilter(search: "episode.7"), DownloadFilter(search: "secret"),
                DownloadFilter(search: "redacted"), DownloadFilter(search: "ärger"), DownloadFilter(search: "kelvin k"),
                DownloadFilter(search: "seven"), DownloadFilter(search: "パス"), DownloadFilter(search: "nothing"),
                DownloadFilter(category: "tv"), DownloadFilter(category: "t"), DownloadFilter(ids: ["k7", "t1"]),
                DownloadFilter(idPrefix: "abc"), DownloadFilter(idPrefix: "5sbz0abcdefghjk"),
                DownloadFilter(states: [.completed], search: "mkv", category: "tv"),
            ] + [
                {
                    var f = DownloadFilter(); f.owner = "tok1"; return f
                }(),
                {
                    var f = DownloadFilter(); f.kinds = [.torrent]; return f
                }(),
                {
                    var f = DownloadFilter(); f.kinds = [.auto, .hls]; return f
                }(),
            ]
        for download in downloads {
            let box = MachineBox(DownloadMachine(download: download, settings: MachineSettings()))
            box.pack()
            XCTAssertTrue(box.isPacked)
            for filter in filters {
                XCTAssertEqual(box.matches(filter), filter.matches(download), "\(download.id) \(filter)")
            }
            let fields = box.sortFields
            XCTAssertEqual(fields.sequence, download.sequence)
            XCTAssertEqual(fields.state, download.state)
            XCTAssertEqual(fields.totalBytes, download.totalBytes)
            XCTAssertEqual(fields.receivedBytes, download.receivedBytes)
            XCTAssertEqual(fields.priority, download.priority)
            XCTAssertEqual(fields.queueOrder, download.queueOrder)
            XCTAssertEqual(box.id, download.id)
        }
        // The ones the bytes cannot tell about are told by the download unpacked.
        XCTAssertNil(PackedDownload(credentials).matches(DownloadFilter(search: "secret")))
        XCTAssertNil(PackedDownload(torrent).matches(DownloadFilter(search: "seven")))
        XCTAssertEqual(PackedDownload(named).matches(DownloadFilter(search: "episode.7")), true)
        XCTAssertEqual(PackedDownload(plain()).matches(DownloadFilter(search: "3456")), true)
    }
}
