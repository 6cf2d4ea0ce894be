import HaulLoop

/// What the engine gives every component it hosts: the store, its time and loop, the flags' settings, the log, the
/// fetcher and the next turn. Each component's host protocol adds what is its own to ask.
protocol HostServices: AnyObject {
    var store: DownloadStore { get }
    var clock: Clock { get }
    /// The loop that hands blocking work (a sync, a move, a checksum) to its threads.
    var loop: EventLoop { get }
    var config: EngineConfig { get }
    var log: Logger { get }
    var fetcher: Fetcher { get }
    /// Work for the loop's next turn: nothing touches the fetcher from inside a transfer's callback.
    var turns: TurnQueue { get }
}
