import FoundationEssentials

/// One more source of a download's file. It is probed (HEAD) once the download's size is known; a mirror whose size
/// differs, that serves no ranges, or that fails twice is dropped with the reason, and the others go on. Its bytes
/// count what was written from it.
public struct Mirror: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Not probed yet (or again, after the file changed).
        case pending
        case active
        case dropped
    }

    public var url: String
    public var state = State.pending
    public var reason: String?
    /// Its own validators, sent as If-Range to it: mirrors are other servers, with other ETags.
    public var etag: String?
    public var lastModified: String?
    public var receivedBytes: Int64 = 0
    public var errors = 0

    public init(url: String) { self.url = url }

    public var validator: String? { etag ?? lastModified }

    /// Stored as JSON in the download's row.
    static func encode(_ mirrors: [Mirror]) -> String {
        JSONValue.array(
            mirrors.map { m in
                .object([
                    ("url", .string(m.url)), ("state", .string(m.state.rawValue)), ("reason", JSONValue(m.reason)),
                    ("etag", JSONValue(m.etag)), ("last_modified", JSONValue(m.lastModified)),
                    ("bytes", JSONValue(m.receivedBytes)), ("errors", JSONValue(Int64(m.errors))),
                ])
            }
        ).serialized()
    }

    static func decode(_ text: String?) -> [Mirror] {
        guard let text, case .array(let items)? = try? JSONValue.parse(Array(text.utf8)) else { return [] }
        return items.compactMap { item in
            guard let url = item["url"]?.stringValue else { return nil }
            var m = Mirror(url: url)
            m.state = item["state"]?.stringValue.flatMap(State.init) ?? .pending
            m.reason = item["reason"]?.stringValue
            m.etag = item["etag"]?.stringValue
            m.lastModified = item["last_modified"]?.stringValue
            m.receivedBytes = item["bytes"]?.integerValue ?? 0
            m.errors = Int(item["errors"]?.integerValue ?? 0)
            return m
        }
    }
}
