import HaulCore

/// One `snapshot` event written in pieces as its client reads them. The event is still one event (its `data:` lines
/// join into `{"downloads":[...]}`, valid JSON since a line break is whitespace there), but no piece holds more than
/// `pageSize` downloads, and the next piece is made only when the client has taken the previous ones: a client that
/// asks for a snapshot of 100,000 downloads and never reads costs one piece, not the whole list.
final class SnapshotStream {
    /// Downloads per piece: about 60 KiB of JSON.
    static let pageSize = 100

    /// The stream's caller's operations: only what its token sees, with owners for managers.
    private let operations: Operations
    /// The event's id: the hub's sequence when the snapshot began. Changes after it follow as ordinary events.
    private let sequence: Int64
    /// Only this download (a per-download stream), or all of them.
    private let downloadID: String?
    /// Only the downloads of this category.
    private let category: String?
    /// The sequence number of the last download written.
    private var cursor: Int64 = 0
    private var stage = Stage.header

    private enum Stage { case header, items(first: Bool), done }

    init(operations: Operations, sequence: Int64, downloadID: String?, category: String? = nil) {
        self.operations = operations
        self.sequence = sequence
        self.downloadID = downloadID
        self.category = category
    }

    /// The next piece of the event, or nil once it has all been written.
    func next() -> String? {
        switch stage {
        case .header:
            stage = .items(first: true)
            return "id: \(sequence)\nevent: snapshot\ndata: {\"downloads\":[\n"
        case .items(let first):
            let (items, more) = page()
            guard !items.isEmpty else {
                stage = .done
                return "data: ]}\n\n"
            }
            cursor = items.last!.download.sequence
            stage = more ? .items(first: false) : .done
            let json = items.map {
                String(decoding: DownloadResource.bytes($0, owner: operations.caller.seesOwners), as: UTF8.self)
            }.joined(separator: ",")
            return "data: " + (first ? "" : ",") + json + "\n" + (more ? "" : "data: ]}\n\n")
        case .done:
            return nil
        }
    }

    private func page() -> (items: [DownloadSnapshot], more: Bool) {
        guard let downloadID else {
            var query = DownloadQuery()
            query.filter.category = category
            query.cursor = .sequence(cursor)
            query.limit = SnapshotStream.pageSize
            let page = operations.page(query)
            return (page.downloads, page.next != nil)
        }
        // A per-download stream's snapshot is that download, if it is still there.
        guard cursor == 0, let snapshot = operations.snapshot(downloadID) else { return ([], false) }
        return ([snapshot], false)
    }
}
