import FoundationEssentials
import HaulCore
import HaulLoop

/// Every open read of an unfinished file, by download: woken by each write and change of their download, checked
/// for stalls and for their tokens, and counted among the long-lived connections.
final class FileReaders {
    private var byDownload: [String: [ObjectIdentifier: FileReader]] = [:]
    private(set) var count = 0
    private let operations: Operations
    /// Seconds a read may wait for bytes before it ends with what it sent.
    let stall: Double

    init(operations: Operations, stall: Double) {
        self.operations = operations
        self.stall = stall
    }

    private var now: Double { operations.clock.now }

    /// Starts `request`'s read through `sink`.
    func attach(_ sink: ByteSink, for request: FileStreamRequest) {
        let reader = FileReader(request, sink: sink, now: now)
        reader.onEnd = { [unowned self] in self.remove($0) }
        byDownload[request.id, default: [:]][ObjectIdentifier(reader)] = reader
        count += 1
        operations.follow(reading: request.id, true)
        reader.pump(now: now)
    }

    private func remove(_ reader: FileReader) {
        let id = reader.request.id
        guard byDownload[id]?.removeValue(forKey: ObjectIdentifier(reader)) != nil else { return }
        if byDownload[id]?.isEmpty == true { byDownload[id] = nil }
        count -= 1
        operations.follow(reading: id, false)
    }

    /// Bytes of `id` landed, or it changed: its readers send what they can now (or end).
    func wake(_ id: String) {
        guard let readers = byDownload[id] else { return }
        let now = now
        for reader in readers.values { reader.pump(now: now) }
    }

    func engineChanged(_ change: EngineChange) {
        switch change {
        case .created: return
        case .updated(let id, _), .removed(let id, _): wake(id)
        }
    }

    /// Ends the reads that waited too long, and those of tokens that no longer stand (`stands` says which do).
    func check(stands: (String) -> Bool) {
        let now = now
        for reader in byDownload.values.flatMap(\.values) {
            if let token = reader.tokenID, !stands(token) {
                reader.cut()
            } else {
                reader.checkStall(now: now, stall: stall)
            }
        }
    }

    /// Ends the reads made with the token `id`.
    func cutOff(token id: String) {
        for reader in byDownload.values.flatMap(\.values) where reader.tokenID == id { reader.cut() }
    }

    /// The tokens open reads were made with.
    var tokens: Set<String> { Set(byDownload.values.flatMap(\.values).compactMap(\.tokenID)) }
}
