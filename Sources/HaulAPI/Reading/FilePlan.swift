import HaulCore
import HaulLoop

/// The answer to a read of an unfinished file: status, headers, the bytes to send and of which version.
struct FileAnswer {
    var status: Int
    var headers: [(name: String, value: String)]
    var first: Int64
    /// The last byte (inclusive); nil: to the end of a file whose size is not known.
    var last: Int64?
    var version: Int
}

/// What a read asked of an unfinished file (its Range, whether conditional, the file's headers), answered against
/// what the download holds: a pure value.
struct FilePlan {
    let range: String?
    /// `If-Range` was sent: no validator stands for a file still arriving, so the whole file is answered.
    let conditional: Bool
    let headers: [(name: String, value: String)]

    /// Whether the answer waits: the size is about to be told by the probe under way.
    static func waitsForSize(_ view: ReadView) -> Bool {
        view.download.totalBytes == nil && view.growing
            && (view.download.state == .probing || view.download.state == .queued)
    }

    func answer(_ view: ReadView) throws(Problem) -> FileAnswer {
        let download = view.download
        var headers = self.headers
        var answer = FileAnswer(status: 200, headers: [], first: 0, last: nil, version: view.version)
        if let size = download.totalBytes {
            headers.append(("Accept-Ranges", "bytes"))
            switch conditional ? .whole : FileResponse.range(range, size: size) {
            case .whole:
                answer.last = size - 1
            case .part(let from, let to):
                (answer.status, answer.first, answer.last) = (206, from, to)
                headers.append(("Content-Range", "bytes \(from)-\(to)/\(size)"))
            case .unsatisfiable:
                throw FileResponse.unsatisfiable(size: size)
            }
            headers.append(("Content-Length", String(max(0, (answer.last ?? -1) - answer.first + 1))))
        } else if !conditional, case .part(let from, let to) = FileResponse.range(range, size: .max), to < .max - 1 {
            // The size is not known yet (a playlist's output grows to its end): a range with both ends is answered
            // as it arrives, its complete length `*` (RFC 9110 14.4); an open one gets the whole stream.
            (answer.status, answer.first, answer.last) = (206, from, to)
            headers.append(("Content-Range", "bytes \(from)-\(to)/*"))
            headers.append(("Content-Length", String(to - from + 1)))
        }
        // Nothing at the first byte asked, and nothing more coming without a client's word: said, not hung on.
        if download.totalBytes != 0, view.available.readable(from: answer.first) == nil, !view.growing {
            let state = download.state.rawValue
            throw Problem(
                status: 409, slug: "not-on-disk", title: "Not on disk",
                detail: "byte \(answer.first) of the file is not on disk and the download is \(state)"
                    + (download.state == .failed
                        ? "" : "; resume it (or read with ?start=1 when it is queued) to fetch it"))
        }
        answer.headers = headers
        return answer
    }
}
