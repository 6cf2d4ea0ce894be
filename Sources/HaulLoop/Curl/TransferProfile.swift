/// How one kind of origin is spoken to through curl: the settings its transfers get, by name; how its answers are
/// read; how its failures are; and where its answers may redirect. A dialect (HaulCore's `OriginDialect`) builds
/// one for each request it makes, and `Transfer` applies it without knowing which protocol it speaks: a new
/// protocol is a new dialect and its profile, not a change here.
public struct TransferProfile: Sendable, Equatable {
    /// How the origin's answer reaches Haul.
    public enum Answers: Sendable, Equatable {
        /// Header lines, each answer of a redirect chain read as it comes.
        case headerLines
        /// A file server's replies, made into one HTTP-like answer once the data flows, so that every answer is
        /// read alike: 200 and the size for the whole file, 206 and `Content-Range` for a range (its total from
        /// the size, or from where an open-ended range ends), `Last-Modified` from the file's modification time,
        /// `Accept-Ranges` when the size is known.
        case fileServerReplies
    }

    /// A curl setting a kind of origin needs.
    public enum Setting: Sendable, Equatable {
        /// HTTP/2 where TLS offers it (ALPN), 1.1 elsewhere: a download's segments are then streams of one
        /// connection. On the schemes in `waitOn` (those over TLS) a transfer that starts while the host's first
        /// connection is still being made waits to learn whether it can share it, instead of opening its own.
        case http2(waitOn: [String])
        /// Credentials go as HTTP authentication: Basic at once, as curl and aria2 send it (a server may answer
        /// 404 rather than 401 to a request without), Digest when a 401 asked for it.
        case httpAuthentication
        /// The file's modification time is asked for (MDTM, the SFTP stat): with its size it tells one version of
        /// the file from another.
        case fileTime
        /// Passive only, and the data connection goes to the control connection's address, never to one a PASV
        /// reply names: a hostile server could point it at an internal host, which the address policy would then
        /// be asked about instead of the server it trusted. EPSV first.
        case passiveToControlAddress
        /// AUTH TLS on the control connection, required (explicit FTPS).
        case requireTLS
        /// The file's size asked for (and the offset of a range given) by commands Haul sends before the
        /// transfer, curl told to ignore the size: a server whose data runs past its size would otherwise leave a
        /// file cut short that looks whole.
        case sizeAndOffsetCommands
        /// An SSH login (a password, or the operator's key, never a key a client names), the host key always
        /// checked: against the known hosts, or the download's pin.
        case ssh
        /// The multi runs the transfer now and then, whatever its sockets say (curl's FTPS may hold data its
        /// sockets no longer signal).
        case sweeps
    }

    /// How a failed transfer is read, beyond the connection's failures every kind reads alike.
    public enum Failures: Sendable, Equatable {
        /// A web server's: a reply that is no HTTP at all is a bad response (curl calls it an unsupported
        /// protocol, as if after a redirect).
        case http
        /// A file server's: a login, a file or an offset refused (with its reply code), too many sessions, a host
        /// key unknown or another.
        case fileServer
    }

    public var answers: Answers
    public var settings: [Setting]
    public var failures: Failures
    /// The schemes an answer may redirect to, of those the policy allows.
    public var redirects: [String]
    /// The URL as curl is given it, when not the request's (explicit FTPS goes as ftp://, its TLS set apart).
    public var curlURL: String?

    public init(
        answers: Answers = .headerLines, settings: [Setting] = [], failures: Failures = .http,
        redirects: [String] = [], curlURL: String? = nil
    ) {
        self.answers = answers
        self.settings = settings
        self.failures = failures
        self.redirects = redirects
        self.curlURL = curlURL
    }

    func has(_ setting: Setting) -> Bool { settings.contains(setting) }
}
