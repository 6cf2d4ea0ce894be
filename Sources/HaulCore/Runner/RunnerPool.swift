import HaulLoop

/// The running downloads: a runner each, the fetcher their transfers run on, the tick that brings them their
/// progress samples, and the work they deferred to the next turn.
final class RunnerPool {
    let fetcher: Fetcher
    /// The curl multi handle when the engine made its own fetcher on its loop; closed at shutdown.
    private let multi: CurlMulti?
    /// The transfer loops when the engine's transfers run on loops of their own; stopped at shutdown.
    private let transferLoops: TransferLoops?
    let turns: TurnQueue
    let playlists: HLSTransfers
    /// BitTorrent downloads' session (nil when BitTorrent is off).
    var torrents: TorrentTransfers?
    /// The remux program's thread, started when first needed.
    private var remuxPool: CommandPool?
    private(set) var runners: [String: DownloadRunner] = [:]
    private var tick: ClockTimer?

    /// A pool fetching with libcurl on `loop`, or on `transferLoops` loops of their own, unless a test gives its
    /// own fetcher.
    init(loop: EventLoop, clock: Clock, fetcher: Fetcher?, transferLoops: Int = 0) throws {
        if let fetcher {
            self.fetcher = fetcher
            multi = nil
            self.transferLoops = nil
        } else if transferLoops > 0 {
            let loops = try TransferLoops(home: loop, count: transferLoops)
            self.fetcher = loops
            self.transferLoops = loops
            multi = nil
        } else {
            self.transferLoops = nil
            let multi = try CurlMulti(loop: loop)
            self.fetcher = multi
            self.multi = multi
        }
        turns = TurnQueue(clock: clock)
        playlists = HLSTransfers(fetcher: self.fetcher, turns: turns)
    }

    subscript(id: String) -> DownloadRunner? { runners[id] }

    /// The pool the operator's remux program runs on, killed after `timeout` seconds.
    func remuxCommands(timeout: Double) -> CommandPool? {
        if remuxPool == nil { remuxPool = try? CommandPool(concurrency: 2, timeout: timeout) }
        return remuxPool
    }

    var count: Int { runners.count }
    /// The runners holding a slot (a seeding torrent holds none).
    var busy: Int { runners.values.reduce(0) { $0 + ($1.torrent.seeding ? 0 : 1) } }

    var ids: Dictionary<String, DownloadRunner>.Keys { runners.keys }

    /// Starts `runner` (after its slot is taken here: starting may finish it at once).
    func start(_ runner: DownloadRunner) {
        runners[runner.id] = runner
        runner.begin()
    }

    /// Takes the runner of `id` out of the pool (its download no longer holds a slot).
    @discardableResult
    func remove(_ id: String) -> DownloadRunner? { runners.removeValue(forKey: id) }

    /// Gives every runner `event`.
    func deliverToAll(_ event: MachineEvent) {
        for runner in Array(runners.values) { runner.deliver(event) }
    }

    /// Ticks every `interval` seconds: each running download samples its speed and checks for stalls.
    func startTicking(every interval: Double, clock: Clock) {
        tick = clock.every(interval) { [unowned self] in
            self.deliverToAll(.tick(now: clock.now))
            self.torrents?.tick()
        }
    }

    /// Stops every transfer, each keeping its part file and checkpointing it; what was deferred has nothing left
    /// to do.
    func stop() {
        tick?.cancel()
        deliverToAll(.stop(keepFile: true))
        runners.removeAll()
        turns.cancel()
    }

    /// Closes the fetcher: every transfer ends.
    func close() {
        multi?.close()
        transferLoops?.close()
        torrents?.close()
    }
}
