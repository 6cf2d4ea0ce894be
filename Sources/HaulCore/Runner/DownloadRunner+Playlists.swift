import HaulLoop

/// An HLS download's transfers: the playlist's stream in place of a plain request, and a first answer that turns
/// out to be a playlist handed over to one.
extension DownloadRunner {
    /// An HLS download's transfer: the playlist's stream, on `request`'s settings.
    func startPlaylist(_ transfer: TransferID, _ request: TransferRequest, of download: Download) {
        host.playlists.start(
            transfer, request, delegate: self, variant: download.variant, connections: download.connections,
            index: playlistIndex, observer: self)
    }

    /// The first answer of a download of kind `auto` is a playlist: the request is dropped, and the playlist's
    /// stream answers in its place under the same transfer, so the machine hears one first answer.
    func becomePlaylist(_ transfer: TransferID) {
        becomingPlaylists.insert(transfer)
        deliver(.becamePlaylist)
        // Inside the transfer's own callback: the fetcher is called on the next turn.
        host.turns.later {
            self.host.fetcher.cancel(transfer)
            // The stream's requests hold connections of their own.
            self.releaseHostConnection(transfer)
            guard self.becomingPlaylists.remove(transfer) != nil, self.transfers.contains(transfer),
                let download = self.host.download(self.id)
            else { return }
            self.startPlaylist(transfer, self.request(.probe, url: download.url, of: download), of: download)
        }
    }

    func resumeTransfer(_ transfer: TransferID) {
        if host.playlists.isStream(transfer) { host.playlists.resume(transfer) } else { host.fetcher.resume(transfer) }
    }

    func cancelTransfer(_ transfer: TransferID) {
        becomingPlaylists.remove(transfer)
        if host.playlists.isStream(transfer) { host.playlists.cancel(transfer) } else { host.fetcher.cancel(transfer) }
    }
}

extension DownloadRunner: HLSObserver {
    func playlistProgress(_ info: HLSInfo) { deliver(.playlist(info)) }
}
