extension Logger {
    /// One line per state change: what a log reader follows a download by. At info a download that runs through
    /// says it was added and that it completed (or failed, a warning); the steps between (probing, downloading,
    /// verifying, and back to queued for a retry) are debug lines. A small file wrote five lines, as many as the
    /// rest of its work cost in formatting.
    func stateChanged(_ download: Download, from before: DownloadState) {
        let step = download.state.isActive || (download.state == .queued && before.isActive)
        guard !step || minimum <= .debug else { return }
        var meta = ["download.id": download.id, "state.from": before.rawValue, "state.to": download.state.rawValue]
        if download.state == .completed, let name = download.filename {
            meta["file.name"] = name
            meta["file.size"] = String(download.receivedBytes)
        }
        if download.state == .failed, let error = download.error {
            meta["error.code"] = error.code.rawValue
            meta["error.message"] = error.message
            return warning("download failed", meta)
        }
        if download.state == .completed { return info("download completed", meta) }
        log(step ? .debug : .info, "state changed", meta)
    }
}
