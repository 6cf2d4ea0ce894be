import Foundation
import HaulLoop

/// The probe (HEAD, else a one-byte ranged GET) and the part file it leads to.
extension Job {
    func probe(head: Bool) {
        guard let download = engine.download(id) else { return }
        probeStartedAt = nil
        var request = baseRequest(download)
        if head {
            request.method = .head
        } else {
            request.range = (0, 0)
        }
        do {
            let transfer = try Transfer(request)
            // A 200 to the ranged probe would stream the whole file: the headers are all we need.
            transfer.onResponse = { response in head || response.status == 206 }
            transfer.onComplete = { [weak self] result in self?.probeEnded(result, head: head) }
            probeTransfer = transfer
            engine.multi.add(transfer)
        } catch {
            failed(DownloadError(.internalError, "cannot start a transfer: \(error)"))
        }
    }

    func probeEnded(_ result: TransferResult, head: Bool) {
        probeTransfer = nil
        guard !stopped else { return }
        guard let response = result.response, result.failure == nil || result.failure == .aborted else {
            if head, result.failure == .cutOff || result.failure == .other {
                return probe(head: false)
            }
            return failed(Job.error(for: result), retry: { [weak self] in self?.probe(head: true) })
        }
        let outcome = head ? Probe.interpretHead(response) : Probe.interpretRangedGet(response)
        switch outcome {
        case .tryRangedGet:
            headLength = (200..<300).contains(response.status)
                ? response.header("content-length").flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil } : nil
            probe(head: false)
        case .httpError(let status):
            failed(Job.httpError(status, response: response), retry: { [weak self] in self?.probe(head: true) })
        case .result(var result):
            // A server that answers GET without a length (chunked) may still have told HEAD the size: keep it, so a
            // body running past it is caught instead of written forever.
            if !head, result.totalBytes == nil { result.totalBytes = headLength }
            probed(result)
        }
    }

    func probed(_ probe: ProbeResult) {
        guard let before = engine.download(id) else { return }
        if let expected = before.expectedBytes, let total = probe.totalBytes, expected != total {
            return failed(DownloadError(.sizeMismatch, "the server says the file has \(total) bytes; "
                + "\(expected) were expected (size)"))
        }
        let changed = before.receivedBytes > 0
            && (before.totalBytes != probe.totalBytes || before.etag != probe.etag
                || before.lastModified != probe.lastModified)
        if changed { log.info("remote file changed since the last attempt; starting over", meta) }
        engine.modify(id) {
            $0.finalURL = probe.finalURL
            $0.totalBytes = probe.totalBytes
            $0.acceptsRanges = probe.acceptsRanges
            $0.etag = probe.etag
            $0.lastModified = probe.lastModified
            $0.contentType = probe.contentType
            if changed { $0.segments = [] }
        }
        do {
            try openPartFile(contentDisposition: probe.contentDisposition)
        } catch {
            return failed(Job.fileError(error))
        }
        engine.modify(id) { $0.state = .downloading }
        plan()
    }

    /// Opens the part file, choosing and reserving a free name on the first attempt. A part file that is not Haul's
    /// own (another hard link to it, another owner: planted, or shared with a file outside the root) is never
    /// written: the download passes over that name for a free one and starts again from byte 0.
    func openPartFile(contentDisposition: String?) throws(FileError) {
        guard let download = engine.download(id) else { return }
        let directory = try engine.directory(download.directory, create: true)
        if let name = download.filename {
            do {
                file = try PartFile(directory: directory, name: name + ".part")
                return
            } catch where error.isForeign {
                log.warning("\(error); choosing another name", meta)
                generation += 1
                engine.modify(id) {
                    $0.filename = nil
                    $0.segments = []
                }
            }
        }
        let base = download.requestedFilename
            ?? FileName.derive(contentDisposition: contentDisposition, finalURL: download.finalURL ?? download.url)
        for n in 0..<10_000 {
            let name = FileName.candidate(base, n)
            if directory.exists(name) { continue }
            if let size = directory.size(name + ".part"), !engine.isClaimed(directory: download.directory, name: name) {
                // A part file nobody journals (another tool's, or ours with the database lost): the resume plan
                // continues it if smaller than the remote file, completes it if equal, restarts it if larger.
                do {
                    file = try PartFile(directory: directory, name: name + ".part")
                } catch where error.isForeign {
                    continue
                }
                engine.modify(id) {
                    $0.filename = name
                    $0.segments = [Segment(start: 0, end: $0.totalBytes.map { $0 - 1 }, received: size)]
                    $0.journal = $0.segments
                }
                log.info("adopting an existing part file", meta.merging(["file.size": "\(size)"]) { a, _ in a })
                return
            }
            do {
                // O_EXCL: two downloads of the same name never share a part file.
                file = try PartFile(directory: directory, name: name + ".part", exclusive: true)
            } catch where error.code == EEXIST {
                continue
            }
            engine.modify(id) { $0.filename = name }
            return
        }
        throw FileError(call: "open", path: directory.shown(base), code: EEXIST)
    }
}
