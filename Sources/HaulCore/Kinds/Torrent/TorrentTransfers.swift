import Glibc
import HaulLoop

/// Hears what the session says of one torrent: its download's runner.
protocol TorrentObserver: AnyObject {
    func torrentEvent(_ event: TorrentEvent)
    /// A second passed: read the torrent's progress.
    func torrentTick()
}

/// The BitTorrent session of the engine's running torrents, made when the first one starts: it adds, releases and
/// takes out torrents for their runners, saves their resume data beside their files, and hands each runner what
/// libtorrent says of its torrent. A torrent's key is its download's sequence number.
final class TorrentTransfers {
    /// What is done with a torrent being taken out of the session, once libtorrent has let go of it.
    private struct Leaving {
        /// Where its resume data goes (nil: none is saved).
        var staging: ConfinedDirectory?
        var deleteFiles: Bool
        var then: (() -> Void)?
    }

    private struct Observer {
        weak var runner: (any TorrentObserver)?
    }

    private let loop: EventLoop
    private let makeSettings: () -> TorrentSettings
    private let log: Logger
    private var made: TorrentSession?
    private var observers: [UInt64: Observer] = [:]
    private var leaving: [UInt64: Leaving] = [:]
    /// Starts that wait for the same torrent's exit (paused and resumed at once).
    private var waiting: [UInt64: () -> Void] = [:]

    init(loop: EventLoop, log: Logger, settings: @escaping () -> TorrentSettings) {
        self.loop = loop
        self.log = log
        makeSettings = settings
    }

    /// The session, made at the first use.
    func session() throws(TorrentError) -> TorrentSession {
        if let made { return made }
        do {
            let session = try TorrentSession(loop: loop, settings: makeSettings()) { [unowned self] events in
                for event in events { self.dispatch(event) }
            }
            made = session
            return session
        } catch let error as TorrentError {
            throw error
        } catch {
            throw TorrentError("\(error)")
        }
    }

    /// Adds `add` for `observer`, after the same torrent's exit when it is still leaving.
    func start(_ add: TorrentAdd, observer: any TorrentObserver) {
        guard leaving[add.key] == nil else {
            waiting[add.key] = { [weak observer] in
                guard let observer else { return }
                self.start(add, observer: observer)
            }
            return
        }
        observers[add.key] = Observer(runner: observer)
        do {
            try session().add(add)
        } catch {
            observers[add.key] = nil
            observer.torrentEvent(.error(add.key, error.message))
        }
    }

    /// Takes the torrent out of the session: its resume data saved into `staging` first (unless its files are
    /// deleted with it), then `then` once libtorrent has let go of its files.
    func stop(_ key: UInt64, staging: ConfinedDirectory?, deleteFiles: Bool, then: (() -> Void)? = nil) {
        observers[key] = nil
        guard let session = made, session.status(key) != nil else {
            then?()
            return
        }
        leaving[key] = Leaving(staging: deleteFiles ? nil : staging, deleteFiles: deleteFiles, then: then)
        if deleteFiles || staging == nil {
            session.remove(key, deleteFiles: deleteFiles)
        } else {
            session.saveResume(key, flush: true)
        }
    }

    /// Saves the torrent's resume data into `staging` (while it runs: what a crash resumes from).
    func checkpoint(_ key: UInt64) { made?.saveResume(key, flush: false) }

    func status(_ key: UInt64) -> TorrentStatus? { made?.status(key) }

    /// The session, if it was made (nil: no torrent ever ran).
    var current: TorrentSession? { made }

    /// Every second: each running torrent reads its progress.
    func tick() {
        for observer in observers.values { observer.runner?.torrentTick() }
    }

    /// Stops the session: torrents still leaving get their resume data saved first (a few seconds at most).
    func close() {
        var rounds = 0
        while !leaving.isEmpty, let session = made, rounds < 250 {
            rounds += 1
            usleep(20_000)
            session.poll()
        }
        made?.close()
        made = nil
    }

    // MARK: events

    private func dispatch(_ event: TorrentEvent) {
        switch event {
        case .resumeData(let key, let data):
            if let exit = leaving[key] {
                save(data, of: key, into: exit.staging)
                made?.remove(key, deleteFiles: false)
            } else if let runner = observers[key]?.runner {
                runner.torrentEvent(event)
            }
        case .resumeFailed(let key, _) where leaving[key] != nil:
            made?.remove(key, deleteFiles: false)
        case .removed(let key):
            // With its files deleted, the deletion's own event ends the exit.
            if leaving[key]?.deleteFiles != true { left(key) }
        case .filesDeleted(let key), .deleteFailed(let key, _):
            left(key)
        case .listenFailed(let message):
            log.warning("BitTorrent cannot listen", ["error": message])
        default:
            guard let key = event.key, let runner = observers[key]?.runner else { return }
            runner.torrentEvent(event)
        }
    }

    private func save(_ data: [UInt8], of key: UInt64, into staging: ConfinedDirectory?) {
        guard let staging, !data.isEmpty else { return }
        do {
            try staging.writeFile(TorrentStaging.resume, data)
        } catch {
            log.warning("cannot save a torrent's resume data", ["error": "\(error)"])
        }
    }

    private func left(_ key: UInt64) {
        let exit = leaving.removeValue(forKey: key)
        exit?.then?()
        if let start = waiting.removeValue(forKey: key) { start() }
    }

    /// Resume data that came while the torrent runs (a checkpoint).
    func saveCheckpoint(_ data: [UInt8], of key: UInt64, into staging: ConfinedDirectory?) {
        save(data, of: key, into: staging)
    }
}

/// Where a torrent's files wait until they are complete: a hidden folder of its own in the download's folder,
/// holding libtorrent's save path and what resumes it.
enum TorrentStaging {
    static func name(_ id: String) -> String { ".haul-torrent-" + id }
    /// libtorrent's save path inside it: the torrent's folder (or single file) lands there under its name.
    static let data = "data"
    static let metadata = "meta.torrent"
    static let resume = "resume.dat"
}

extension TorrentEvent {
    /// The torrent it is about (none for the session's own).
    var key: UInt64? {
        switch self {
        case .metadata(let key), .checked(let key), .finished(let key), .piece(let key, _), .error(let key, _),
            .resumeData(let key, _), .resumeFailed(let key, _), .paused(let key), .resumed(let key),
            .removed(let key), .filesDeleted(let key), .deleteFailed(let key, _):
            return key
        case .listenFailed: return nil
        }
    }
}
