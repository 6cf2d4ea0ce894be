import Foundation
import HaulLoop

/// The end of a download: sync, checksum, the final name, and failures with their retries.
extension Job {
    // MARK: completion

    /// Every byte is in the part file: make it durable, check it, then give it its final name.
    func transferred() {
        guard let download, let file else { return }
        engine.modify(id) { $0.state = .verifying }
        let handle: SyncHandle
        do {
            handle = try file.syncHandle()
        } catch {
            return failed(Job.fileError(error))
        }
        let expected = download.checksum.flatMap(Checksum.init)
        let synced = download.segments
        engine.loop.offload({ () -> Result<String?, FileError> in
            // Hashed through the descriptor: the bytes checked are the bytes that will get the name.
            guard let expected else { return handle.syncAndClose().map { .failure($0) } ?? .success(nil) }
            return handle.syncHashAndClose(expected.algorithm).map { $0 }
        }, then: { [weak self] result in
            guard let self, !self.stopped else { return }
            switch result {
            case .failure(let error):
                self.failed(Job.fileError(error))
            case .success(let actual):
                if let expected, let actual, actual != expected.hex {
                    return self.checksumMismatch(expected: expected, actual: actual)
                }
                // Every byte is on disk: the journal says so before the file gets a name, so a crash between
                // the link and the unlink is recognised as finished at the next start.
                self.engine.journal(self.id, synced: synced)
                self.publish()
            }
        })
    }

    /// The bytes are wrong: nothing gets the final name, and the part file is discarded so a retry starts over.
    func checksumMismatch(expected: Checksum, actual: String) {
        file?.close()
        file = nil
        if let download, let name = download.filename {
            try? engine.directory(download.directory, create: false).remove(name + ".part")
        }
        generation += 1
        engine.modify(id) {
            $0.segments = []
            $0.state = .failed
            $0.error = DownloadError(.checksumMismatch, "\(expected.algorithm.rawValue) of the file is \(actual), "
                + "expected \(expected.hex)")
        }
        log.warning("checksum mismatch", meta)
        engine.jobEnded(id)
    }

    func publish() {
        guard let download, let base = download.filename, let file else { return }
        let directory = file.directory
        // Only the file written gets the name: not one put in its place, nor one someone else holds a link to.
        if let why = file.replacedOrShared() {
            return failed(DownloadError(.writeFailed, "the part file \(file.path) \(why); nothing was given the "
                + "final name"))
        }
        let size: Int64
        do {
            size = try file.usage().size
        } catch {
            return failed(Job.fileError(error))
        }
        guard size == download.totalBytes ?? size else {
            return failed(DownloadError(.sizeMismatch, "the part file holds \(size) bytes, expected "
                + "\(download.totalBytes ?? 0)"))
        }
        do {
            for n in 0..<10_000 {
                let name = FileName.candidate(base, n)
                if directory.identity(name) == file.identity {
                    // A crash between link and unlink left both names on this file: finish the unlink.
                    try directory.remove(file.name)
                } else if !(try directory.link(file.name, to: name)) {
                    continue
                }
                file.close()
                self.file = nil
                try directory.sync()
                engine.modify(id) {
                    $0.filename = name
                    $0.journal = $0.segments
                    $0.state = .completed
                    $0.completedAt = Date()
                    $0.error = nil
                }
                engine.jobEnded(id)
                return
            }
            failed(DownloadError(.writeFailed, "no free file name for \(base)"))
        } catch {
            failed(Job.fileError(error))
        }
    }

    // MARK: failures

    /// Retries after a backoff (with `retry`) when the error allows it and attempts remain; otherwise the
    /// download fails and keeps what it received.
    func failed(_ error: DownloadError, retry: (() -> Void)? = nil) {
        guard let download, !stopped else { return }
        if let retry, error.retryable, download.attempts < engine.config.maxAttempts {
            engine.modify(id) { $0.attempts += 1 }
            let delay = backoff(attempt: download.attempts, error: error)
            log.warning("attempt failed, retrying in \(String(format: "%.2f", delay)) s: \(error.message)",
                        meta.merging(["error.code": error.code.rawValue]) { a, _ in a })
            let timer = LoopTimer(loop: engine.loop, delay: delay) { [weak self] in
                self?.probeRetry = nil
                retry()
            }
            probeRetry = timer
            timer.start()
            return
        }
        stopped = true
        dropConnections()
        // Keep what was received: a retry after the cause is fixed continues from there. Give back the rest.
        releaseUnwritten()
        closeFile()
        engine.modify(id) {
            $0.state = .failed
            $0.error = error
        }
        engine.jobEnded(id)
    }

    /// Exponential backoff with ±25% jitter, never sooner than the server's Retry-After.
    func backoff(attempt: Int, error: DownloadError) -> Double {
        let base = min(engine.config.retryMaxDelay,
                       engine.config.retryBaseDelay * pow(2, Double(max(0, attempt - 1))))
        let jittered = base * Double.random(in: 0.75...1.25)
        return max(jittered, min(error.retryAfter ?? 0, 600))
    }
}
