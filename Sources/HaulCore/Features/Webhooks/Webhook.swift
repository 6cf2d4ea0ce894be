import FoundationEssentials
import HaulLoop

/// What a webhook can be told of.
public enum WebhookEvent: String, CaseIterable, Sendable {
    case created, completed, failed, removed
    /// Every change of state (queued, probing, downloading, ... paused), completed and failed included.
    case state
}

/// A receiver of signed POSTs about downloads (`POST /webhooks`). The secret is shown once, when it is made.
public struct Webhook: Sendable, Equatable {
    public var id: String
    public var url: String
    public var secret: String
    public var events: [WebhookEvent]
    /// Only downloads of this category, or every download when nil.
    public var category: String?
    public var createdAt: Date

    public init(id: String, url: String, secret: String, events: [WebhookEvent], category: String?, createdAt: Date) {
        self.id = id
        self.url = url
        self.secret = secret
        self.events = events
        self.category = category
        self.createdAt = createdAt
    }

    public func wants(_ event: WebhookEvent, category: String?) -> Bool {
        events.contains(event) && (self.category == nil || self.category == category)
    }

    /// The `Haul-Signature` header value for `body` sent at `timestamp` (Unix seconds): HMAC-SHA256 under the
    /// secret over "timestamp.body", so a receiver can check both who sent it and that it is not an old one
    /// replayed (it refuses timestamps far from its own clock).
    public static func signature(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        let mac = Digest.hmacSHA256(key: Array(secret.utf8), message: Array("\(timestamp).".utf8) + body)
        return "t=\(timestamp),v1=\(Digest.hex(mac))"
    }

    /// 32 random bytes as hex, prefixed so a leaked one is easy to recognise in logs and repositories.
    public static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + Digest.hex(bytes)
    }
}

/// A change of a download that some webhook asked to hear of, stored once in the transaction of the change: the
/// download as the API showed it then (`resource`, JSON), and which events it is (`state` and `completed`, say).
/// Each webhook that wants it gets a delivery referring to it: a body is kept once per change, never once per
/// webhook.
public struct WebhookChange: Sendable, Equatable {
    public var id: String
    public var downloadID: String
    public var category: String?
    public var kinds: [WebhookEvent]
    public var createdAt: Date
    public var resource: String

    public init(
        id: String, downloadID: String, category: String?, kinds: [WebhookEvent], createdAt: Date,
        resource: String
    ) {
        self.id = id
        self.downloadID = downloadID
        self.category = category
        self.kinds = kinds
        self.createdAt = createdAt
        self.resource = resource
    }
}

/// One event for one webhook, kept in the store's outbox from the transaction of the change it tells of until it
/// is delivered (a 2xx answer) or has been tried for `WebhookDelivery.retention`.
public struct WebhookDelivery: Sendable, Equatable {
    public enum State: String, Sendable {
        case pending, delivered, failed
    }

    /// Whose deliveries a list shows: one webhook's, or every webhook's about one download.
    public enum Subject: Sendable {
        case webhook(String)
        case download(String)
    }

    /// Also the `Haul-Delivery` header: the same on every attempt, so a receiver drops repeats.
    public var id: String
    public var webhookID: String
    public var event: WebhookEvent
    public var downloadID: String
    /// The change it tells of (its body is made from the change's resource when it is sent); nil for a delivery
    /// stored by an earlier version, whose `body` is whole.
    public var changeID: String?
    public var body: String
    public var createdAt: Date
    public var state: State = .pending
    public var attempts = 0
    public var nextAttemptAt: Date
    public var lastAttemptAt: Date?
    /// The HTTP status of the last attempt, nil when none answered.
    public var lastStatus: Int?
    public var lastError: String?

    public init(
        id: String, webhookID: String, event: WebhookEvent, downloadID: String, body: String,
        createdAt: Date
    ) {
        self.id = id
        self.webhookID = webhookID
        self.event = event
        self.downloadID = downloadID
        self.body = body
        self.createdAt = createdAt
        nextAttemptAt = createdAt
    }

    /// How long a delivery is retried before it is given up on.
    public static let retention: Double = 24 * 3600

    /// What is POSTed: `{"id", "event", "webhook_id", "created_at", "download"}`, the download as the change left it
    /// (the change's resource, inserted as it was stored). A delivery from an earlier version sends its own body.
    public func payload(resource: String?) -> [UInt8] {
        guard let resource, changeID != nil else { return Array(body.utf8) }
        var out = Array(
            JSONValue.object([
                ("id", .string(id)),
                ("event", .string(event.rawValue)),
                ("webhook_id", .string(webhookID)),
                ("created_at", .string(Timestamp.rfc3339(createdAt))),
            ]).serialized().utf8.dropLast())
        out += Array(",\"download\":".utf8)
        out += Array(resource.utf8)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The wait after `attempts` failed attempts: `base` (5 s by default) doubling up to an hour, with up to a fifth
    /// more at random so that receivers coming back are not hit by every delivery at once.
    public static func backoff(attempts: Int, base: Double, random: Double) -> Double {
        min(3600, base * Double(1 << min(max(attempts - 1, 0), 20))) * (1 + 0.2 * random)
    }
}
