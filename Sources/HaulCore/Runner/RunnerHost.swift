import HaulLoop

/// What a running download asks of the engine: its machine stepped, the download as it stands and its category,
/// folders under the download root, what the running downloads share (the fetcher, the limits, the next turn),
/// and its node's lease on it.
protocol RunnerHost: HostServices {
    var bandwidth: Bandwidth { get }
    /// HLS downloads' transfers (each a stream of many requests on the fetcher).
    var playlists: HLSTransfers { get }
    /// The BitTorrent session's torrents; nil when BitTorrent is off.
    var torrents: TorrentTransfers? { get }
    /// Where the operator's remux program runs (nil when no thread could be started for it).
    var remuxCommands: CommandPool? { get }
    func download(_ id: String) -> Download?
    func category(_ name: String) -> Category?
    /// The settings in force (a client may change them while downloads run).
    var currentSettings: ServerSettings { get }
    /// The directory `relative` to the download root, opened without following links.
    func directory(_ relative: String, create: Bool) throws(FileError) -> ConfinedDirectory
    /// Whether a download other than `except` still needs the part file `name.part` in `directory`.
    func isClaimed(directory: String, name: String, except: String) -> Bool
    /// The most bytes `id` may hold under its token's quota (nil: no quota).
    func quotaAllowance(for id: String) -> Int64?
    /// Where the body of `id`'s `transfer` may be written as it comes, by a fetcher that writes (`writeWindow`);
    /// nil when each chunk must pass the machine first, or when this node shares its downloads with others (a lease
    /// could run out between two writes).
    func writeWindow(_ id: String, _ transfer: TransferID) -> (start: Int64, end: Int64)?
    /// One step of the machine of `id`: the event in, the actions to carry out back.
    func step(_ id: String, _ event: MachineEvent) -> [MachineAction]
    /// Stores the journal of `id` (what a sync vouched for).
    func saveJournal(_ id: String, _ journal: [Segment])
    /// Whether this node may still act on `id` (its lease holds by its own clock).
    func leaseHolds(_ id: String) -> Bool
    func renewLeaseSoon()
    /// The runner of `id` is done: its slot is free.
    func runnerFinished(_ id: String)
    /// A runner's download gave its slot back but goes on (a torrent seeding).
    func slotFreed()
}
