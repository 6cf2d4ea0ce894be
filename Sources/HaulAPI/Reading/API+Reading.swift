import FoundationEssentials
import HaulCore
import HaulLoop

/// The file route on an unfinished download: the bytes on disk at once, the rest of what was asked as it lands.
extension API {
    func unfinishedFile(_ c: RequestContext, _ view: ReadView) throws(Problem) -> APIResult {
        var view = view
        let id = view.download.id
        if let flag = c.query["start"], flag != "0", flag != "1" {
            throw Problem.invalid([("start", "must be 1 (start a queued download for this read) or 0")])
        }
        if view.download.state == .queued, !view.running {
            // Ahead of the queue only when asked: by the reader (who must be allowed to change it) or the server.
            let started =
                c.query["start"] == "1"
                ? try attempt(c.operations.startForReading(id))
                : limits.startOnRead && c.query["start"] != "0" && (try? serverOperations.startForReading(id)) == true
            if started { view = try attempt(c.operations.readView(id)) }
        }
        if view.download.kind == .torrent, let files = view.download.torrent?.files,
            files.filter(\.wanted).count > 1
        {
            throw Problem(EngineError.conflict(TorrentInfo.severalFiles))
        }
        let plan = FilePlan(
            range: c.request.header("Range"), conditional: c.request.header("If-Range") != nil,
            headers: fileHeaders(c, view.download) + [("Cache-Control", "no-store")])
        let answer = FilePlan.waitsForSize(view) ? nil : try plan.answer(view)
        if c.request.method == "HEAD" {
            var head = answer
            if head == nil { head = try plan.answer(view) }
            return .response(HTTPResponse(status: head!.status, headers: head!.headers))
        }
        try checkLongLivedRoom()
        return .fileStream(
            FileStreamRequest(
                headers: [], id: id, operations: c.operations, plan: plan, answer: answer, path: c.request.path))
    }

    /// Starts reading `request`'s bytes into `sink`, a stream the transport opened for it.
    public func attach(_ sink: ByteSink, for request: FileStreamRequest) {
        readers.attach(sink, for: request)
    }
}
