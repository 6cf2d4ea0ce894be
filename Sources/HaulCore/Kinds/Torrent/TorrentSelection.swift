import Glibc
import HaulLoop

/// Which of a torrent's files to fetch (`files`): comma-separated numbers from 1 in the torrent's order (`3`),
/// ranges (`5-7`), as aria2's `select-file` takes them, and globs (`*.mkv`, `extras/*`) matched against each
/// file's path under the torrent's folder and against its name. A file is fetched when any item names it.
public struct TorrentSelection: Sendable, Equatable {
    enum Item: Sendable, Equatable {
        case numbers(ClosedRange<Int>)
        case glob(String)
    }

    let items: [Item]

    /// nil when `text` is not a selection: an empty item, a control character, over 4 KiB. An item that is not a
    /// number from 1 or a range of them (`0`, `7-5`) is a glob.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= 4096,
            !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F })
        else { return nil }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingSpaces() }
        var items: [Item] = []
        for part in parts {
            guard !part.isEmpty else { return nil }
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            if bounds.count <= 2,
                bounds.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
                let first = Int(bounds[0]), first >= 1, let last = bounds.count == 2 ? Int(bounds[1]) : first,
                last >= first
            {
                items.append(.numbers(first...last))
            } else {
                items.append(.glob(String(part)))
            }
        }
        self.items = items
    }

    /// Whether file `number` (from 1) at `path` ("name/dir/file", the torrent's folder first) is selected.
    public func wants(number: Int, path: String) -> Bool {
        let inner =
            path.split(separator: "/", maxSplits: 1).count == 2
            ? String(path.split(separator: "/", maxSplits: 1)[1]) : path
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return items.contains { item in
            switch item {
            case .numbers(let range): return range.contains(number)
            case .glob(let pattern):
                return fnmatch(pattern, inner, 0) == 0 || fnmatch(pattern, name, 0) == 0
                    || fnmatch(pattern, path, 0) == 0
            }
        }
    }
}
