import FoundationEssentials

/// What the features beside the machine (moves, hooks) record on a finished download.
extension DownloadMachine {
    /// The finished file is in its completed folder now, under `name` (a free one there), as `file`.
    mutating func finishMove(name: String, file: FileStamp) {
        download.filename = name
        download.fileStamp = file
        download.moved = true
        download.moveError = nil
    }

    /// The move was refused: the file stays where it was written, and this says why.
    mutating func moveFailed(_ reason: String) { download.moveError = reason }

    /// The move's marker is removed.
    mutating func settleMove() { download.moveSettled = true }

    /// The hook of the state it is in is due (or, in a state without one, no longer).
    mutating func markHookPending(_ due: Bool) { download.hookPending = due }

    /// The hook ran: how it ended.
    mutating func hookRan(status: Int?, error: String?, at: Date) {
        download.hookPending = false
        download.hookStatus = status
        download.hookError = error
        download.hookAt = at
    }
}
