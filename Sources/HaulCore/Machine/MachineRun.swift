import HaulLoop

/// What a machine keeps while it runs (connections, meters, retries, counters), out of line: a download that has not
/// run since the server started (a finished one, a paused one) holds an empty `RunBox` of 8 bytes instead of this
/// state's 260, so a million stored hold 250 MiB less. Made at the machine's first change; kept after a run ends,
/// so the counter behind transfer and timer ids never goes back.
struct MachineRun {
    /// The most bytes the file may have under its token's quota, as the part file was opened; nil for no quota.
    var quotaAllowance: Int64?
    var connections: [DownloadMachine.Connection] = []
    /// How many connections this download runs at most now.
    var plannedConnections = 0
    /// Bumped whenever the segments are thrown away, so a sync begun before cannot journal stale bytes.
    var generation = 0
    /// Bumped whenever bytes written are given up: a reader that began before may not go on (`Download.available`
    /// then describes another version of the file).
    var discards = 0
    var restarts = 0
    /// The part file's blocks are reserved for the whole known size: writes take no new space.
    var reserved = false
    var unreservedSinceCheck: Int64 = 0
    var bytesSinceCheckpoint: Int64 = 0
    var checkpointInFlight = false
    /// The host refused a connection: none is asked for until one is freed.
    var hostBusy = false
    /// The origin refused to start at an offset (FTP without REST): ranges are not asked for again in this run,
    /// whatever its probe says.
    var rangesRefused = false
    /// The most sessions the origin gave this download before refusing another (FTP 421), nil while none was.
    var sessionCap: Int?
    /// The first request, answered, whose body is to become the first segment's: adopted by the connection for the
    /// segment at byte 0, else stopped.
    var probeStream: (id: TransferID, ranged: Bool)?
    /// The HEADs out to mirrors, by transfer: which mirror each asks.
    var mirrorProbes: [TransferID: Int] = [:]
    /// The comparisons of mirrors' first bytes with the first source's, by transfer: which mirror each asks.
    var mirrorChecks: [TransferID: (mirror: Int, range: ByteRange)] = [:]
    /// Mirrors that agreed at their HEAD, waiting for the first source's first bytes to be compared with.
    var mirrorsAwaitingCheck: Set<Int> = []
    /// The byte ranges mirrors wrote in this run (merged as they grow): what a failed checksum puts in doubt.
    var mirrorWritten: [ByteRange] = []
    /// The size a HEAD told when the first answer told none (asked once per start).
    var headLength: Int64?
    var headTried = false
    var meter = RateMeter()
    /// A torrent's download rate, as libtorrent measures it.
    var torrentRate: Double = 0
    /// Rates of the last connections that finished their ranges: what a free connection is likely to do.
    var recentRates: [Double] = []
    /// The clock's time of the event being handled.
    var now: Double = 0
    /// Why the download had to try again, and when each wait for a retry ends (nil before any retry of this run).
    var retry: RetryWait?
    /// Numbers the transfers and timers it asks for.
    var counter = 0
    /// Jitters retry delays, seeded by the download's sequence number (the same delays in every test run).
    var random: SplitMix64
    /// The actions of the event being handled.
    var pending: [MachineAction] = []

    init(seed: Int64) { random = SplitMix64(seed: UInt64(bitPattern: seed)) }

    /// What a machine that never ran reads.
    static let idle = MachineRun(seed: 0)
}

/// `MachineRun` on the heap, shared by copies of a machine until one changes it (copy on write).
struct RunBox {
    final class Storage {
        // Changed only through a `RunBox` that holds it alone.
        @exclusivity(unchecked) var run: MachineRun

        init(_ run: MachineRun) { self.run = run }
    }

    private var storage: Storage?

    /// Whether the machine changed since the server started (the run is made at its first change).
    var isMade: Bool { storage != nil }

    /// One field, read in place (`MachineRun.idle`'s before the first change).
    subscript<Value>(field: KeyPath<MachineRun, Value>) -> Value {
        if let storage { return storage.run[keyPath: field] }
        return MachineRun.idle[keyPath: field]
    }

    /// The state to change, made (seeded by `seed`) or copied first when needed.
    subscript(seed seed: Int64) -> MachineRun {
        get { storage?.run ?? MachineRun(seed: seed) }
        _modify {
            if storage == nil {
                storage = Storage(MachineRun(seed: seed))
            } else if !isKnownUniquelyReferenced(&storage) {
                storage = Storage(storage!.run)
            }
            yield &storage!.run
        }
    }
}

// The run's fields, read and changed as the machine's own.
extension DownloadMachine {
    var quotaAllowance: Int64? {
        get { run[\.quotaAllowance] }
        _modify { yield &run[seed: download.sequence].quotaAllowance }
    }
    var connections: [Connection] {
        get { run[\.connections] }
        _modify { yield &run[seed: download.sequence].connections }
    }
    var plannedConnections: Int {
        get { run[\.plannedConnections] }
        _modify { yield &run[seed: download.sequence].plannedConnections }
    }
    var generation: Int {
        get { run[\.generation] }
        _modify { yield &run[seed: download.sequence].generation }
    }
    public internal(set) var discards: Int {
        get { run[\.discards] }
        _modify { yield &run[seed: download.sequence].discards }
    }
    var restarts: Int {
        get { run[\.restarts] }
        _modify { yield &run[seed: download.sequence].restarts }
    }
    var reserved: Bool {
        get { run[\.reserved] }
        _modify { yield &run[seed: download.sequence].reserved }
    }
    var unreservedSinceCheck: Int64 {
        get { run[\.unreservedSinceCheck] }
        _modify { yield &run[seed: download.sequence].unreservedSinceCheck }
    }
    var bytesSinceCheckpoint: Int64 {
        get { run[\.bytesSinceCheckpoint] }
        _modify { yield &run[seed: download.sequence].bytesSinceCheckpoint }
    }
    var checkpointInFlight: Bool {
        get { run[\.checkpointInFlight] }
        _modify { yield &run[seed: download.sequence].checkpointInFlight }
    }
    var hostBusy: Bool {
        get { run[\.hostBusy] }
        _modify { yield &run[seed: download.sequence].hostBusy }
    }
    var rangesRefused: Bool {
        get { run[\.rangesRefused] }
        _modify { yield &run[seed: download.sequence].rangesRefused }
    }
    var sessionCap: Int? {
        get { run[\.sessionCap] }
        _modify { yield &run[seed: download.sequence].sessionCap }
    }
    var probeStream: (id: TransferID, ranged: Bool)? {
        get { run[\.probeStream] }
        _modify { yield &run[seed: download.sequence].probeStream }
    }
    var mirrorProbes: [TransferID: Int] {
        get { run[\.mirrorProbes] }
        _modify { yield &run[seed: download.sequence].mirrorProbes }
    }
    var mirrorChecks: [TransferID: (mirror: Int, range: ByteRange)] {
        get { run[\.mirrorChecks] }
        _modify { yield &run[seed: download.sequence].mirrorChecks }
    }
    var mirrorsAwaitingCheck: Set<Int> {
        get { run[\.mirrorsAwaitingCheck] }
        _modify { yield &run[seed: download.sequence].mirrorsAwaitingCheck }
    }
    var mirrorWritten: [ByteRange] {
        get { run[\.mirrorWritten] }
        _modify { yield &run[seed: download.sequence].mirrorWritten }
    }
    var headLength: Int64? {
        get { run[\.headLength] }
        _modify { yield &run[seed: download.sequence].headLength }
    }
    var headTried: Bool {
        get { run[\.headTried] }
        _modify { yield &run[seed: download.sequence].headTried }
    }
    var meter: RateMeter {
        get { run[\.meter] }
        _modify { yield &run[seed: download.sequence].meter }
    }
    var torrentRate: Double {
        get { run[\.torrentRate] }
        _modify { yield &run[seed: download.sequence].torrentRate }
    }
    var recentRates: [Double] {
        get { run[\.recentRates] }
        _modify { yield &run[seed: download.sequence].recentRates }
    }
    var now: Double {
        get { run[\.now] }
        _modify { yield &run[seed: download.sequence].now }
    }
    var retry: RetryWait? {
        get { run[\.retry] }
        _modify { yield &run[seed: download.sequence].retry }
    }
}
