import Glibc
import HaulLoop

/// A transfer's answer, a compared chunk, and the grant that lets a transfer loop write a body itself.
extension DownloadRunner {
    /// The answer of `transfer`: a playlist's (the stream takes over), one whose first bytes will tell, else the
    /// machine's to judge; false when it stopped the transfer.
    func answered(_ transfer: TransferID, _ response: TransferResponse) -> Bool {
        if probes.remove(transfer) != nil, (200..<300).contains(response.status) {
            if DownloadKind.isPlaylistType(response.header("content-type"))
                || DownloadKind.pathNamesPlaylist(response.effectiveURL)
            {
                becomePlaylist(transfer)
                return true
            }
            // A type that says nothing: the first bytes tell whether it is a playlist (`#EXTM3U`).
            if DownloadKind.mayBePlaylist(response) {
                sniffing[transfer] = response
                return true
            }
        }
        return tell(transfer, response)
    }

    /// Hands the machine the answer of `transfer`; false when it stopped the transfer. An answer it took may have
    /// its body written by the fetcher (`offerGrant`).
    func tell(_ transfer: TransferID, _ response: TransferResponse) -> Bool {
        inCallback = transfer
        stopRequested = false
        deliver(.responded(transfer, response))
        inCallback = nil
        guard !stopRequested, !done else { return false }
        offerGrant(transfer)
        return true
    }

    /// Lets a fetcher that writes (transfer loops) put the body of `transfer` into the part file on its own thread,
    /// from its next byte, where the machine says every byte goes as it comes; the bytes it writes are then told as
    /// `wrote`.
    func offerGrant(_ transfer: TransferID) {
        // Not for the last megabyte or less: a transfer loop may have that much queued already, and a grant (a
        // descriptor and a message to the loop) would cost a small file more than it saves.
        // Not under a speed limit either: the limiter holds a transfer by its chunks, and a loop writing on its own
        // would run ahead of it.
        guard host.fetcher.grantsWrites, comparing[transfer] == nil, let file,
            !host.bandwidth.limits(own: bucket, category: category),
            let window = host.writeWindow(id, transfer), window.end - window.start >= 1 << 20,
            let grant = try? file.writeGrant(base: window.start, end: window.end)
        else { return }
        guard host.fetcher.grant(transfer, grant) else { return grant.revoke() }
        grants[transfer] = (grant, window.start)
    }

    /// A speed limit holds the download now (a setting, the schedule's window, its category's, its own): its
    /// transfers' loops write nothing more themselves. What they wrote before is still told and checked (the
    /// grants' offsets stay), and their next bytes come as chunks, which the limiter holds.
    func revokeGrantsIfLimited() {
        guard !grants.isEmpty, host.bandwidth.limits(own: bucket, category: category) else { return }
        for granted in grants.values { granted.grant.revoke() }
    }

    /// Holds each grant to its connection's window now: a segment split by work stealing or by a reader's seek
    /// ends sooner, and its rest is another connection's to write (a loop writing past the split could land its
    /// bytes after that connection's); one no longer fetching writes nothing more. Called after every turn of the
    /// machine, before a connection it started can write anything.
    func narrowGrants() {
        for (transfer, granted) in grants {
            if let window = host.writeWindow(id, transfer) {
                if window.end < granted.grant.end { granted.grant.narrow(to: window.end) }
            } else {
                granted.grant.revoke()
            }
        }
    }

    /// Checks a write of the machine against the grant of `transfer`: body byte k of a granted transfer goes at
    /// the grant's base + k, the bytes before the grant (written here) as those after it (`written` by the fetcher).
    func placed(
        _ transfer: TransferID, offset: Int64, count: Int, written: Bool, in file: PartFile
    ) throws(FileError) {
        guard let granted = grants[transfer] else {
            if written { throw FileError(call: "pwrite", path: file.path, code: EIO) }
            return
        }
        guard granted.next == offset else { throw FileError(call: "pwrite", path: file.path, code: EIO) }
        grants[transfer]?.next = offset + Int64(count)
    }

    /// A chunk of a `compare` transfer against the part file's bytes at the same place: none is written.
    func compare(_ transfer: TransferID, _ chunk: TransferChunk) -> ChunkDecision {
        guard var state = comparing[transfer] else { return .abort }
        let stored = file?.read(chunk.count, at: state.next) ?? []
        if let index = chunk.firstDifference(from: stored) {
            state.differsAt = state.next + Int64(index)
            comparing[transfer] = state
            return .abort
        }
        state.next += Int64(chunk.count)
        comparing[transfer] = state
        return .consumed
    }
}
