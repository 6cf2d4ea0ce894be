import HaulLoop

/// The web dashboard: `dashboard/` compiled in (`Assets`), served at `/` and `/ui/*` without a token (their
/// routes are open: the page holds no data, asks for the token and sends it with each API call).
enum Dashboard {
    /// The page only loads its own script and style and talks only to this server; no other site may frame it.
    /// (`Referrer-Policy` comes with every answer of the API's.)
    static let securityHeaders: [(name: String, value: String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                + "media-src 'self'; "
                + "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"),
    ]

    /// `body` as a `type` response, revalidated by ETag so a reload after an upgrade never runs a stale script.
    static func asset(_ body: [UInt8], type: String, for request: HTTPRequest) -> HTTPResponse {
        let tag = ETag.of(body)
        let headers = [("ETag", tag), ("Cache-Control", "no-cache")] + securityHeaders
        if let header = request.header("If-None-Match"), ETag.matches(header, tag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        return HTTPResponse(status: 200, headers: [("Content-Type", type + "; charset=utf-8")] + headers, body: body)
    }
}
