/// Why the engine refused what a client asked for; the API maps each case to one status.
public enum EngineError: Error, Equatable {
    case notFound(String)
    /// The change is impossible in the download's current state.
    case conflict(String)
    case storage(String)
    /// The file cannot be stored here (its known size does not fit, or is over the largest file accepted).
    case insufficientStorage(DownloadError)
    /// The server holds as many downloads as it may.
    case tooMany
    /// One of an all-or-nothing batch that was fine, not added because another was refused.
    case notAdded
    /// What was asked for existed and is gone (a finished file deleted by hand).
    case gone(String)
    /// A field that is fine alone but not with what the server holds (a directory too deep under its category's).
    case invalid(field: String, message: String)
    /// No such thing (a category, a webhook): the message names it.
    case missing(String)
    /// The server keeps at most `limit` of `kind` ("categories", "webhooks").
    case full(kind: String, limit: Int)
    /// The caller's token may see the download but not change it: another token added it.
    case notOwner(String)
}

extension EngineError {
    /// Runs a call to the store, its failure a storage error.
    static func storing<T>(_ body: () throws -> T) throws(EngineError) -> T {
        do {
            return try body()
        } catch {
            throw .storage("\(error)")
        }
    }
}
