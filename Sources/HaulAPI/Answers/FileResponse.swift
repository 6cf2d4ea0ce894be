import FoundationEssentials
import HaulCore
import HaulLoop

/// `GET /downloads/{id}/file`: a finished file, whole or one byte range (RFC 9110 14), as an attachment.
enum FileResponse {
    /// What a `Range` header asks of a file of `size` bytes.
    enum RangeRequest: Equatable {
        case whole
        /// First and last byte, inclusive.
        case part(Int64, Int64)
        case unsatisfiable
    }

    /// One `bytes=` range (`a-b`, `a-`, `-n`); several ranges, other units or nonsense get the whole file, as a
    /// server may answer them.
    static func range(_ header: String?, size: Int64) -> RangeRequest {
        guard let header, ASCII.hasPrefixIgnoringCase(header.trimmingSpaces(), "bytes=") else { return .whole }
        let spec = header.trimmingSpaces().dropFirst(6).trimmingSpaces()
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingSpaces(), last = spec[spec.index(after: dash)...].trimmingSpaces()
        func number(_ text: String) -> Int64? {
            text.isEmpty || !text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) ? nil : Int64(text)
        }
        if first.isEmpty {
            guard let suffix = number(last) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix), size - 1)
        }
        guard let start = number(first) else { return .whole }
        let end = last.isEmpty ? size - 1 : number(last)
        guard let end, end >= start else { return last.isEmpty ? .unsatisfiable : .whole }
        guard start < size else { return .unsatisfiable }
        return .part(start, min(end, size - 1))
    }

    /// 416 for a range past the end of a file of `size` bytes, with the size a client resumes by.
    static func unsatisfiable(size: Int64) -> Problem {
        var problem = Problem(
            status: 416, slug: "range-not-satisfiable", title: "Range not satisfiable",
            detail: "the file has \(size) bytes")
        problem.headers = [("Content-Range", "bytes */\(size)"), ("Accept-Ranges", "bytes")]
        return problem
    }

    /// `attachment; filename="..."; filename*=UTF-8''...` (RFC 6266, 8187): a plain-ASCII fallback without
    /// quotes or backslashes, and the exact name percent-encoded.
    static func disposition(_ name: String) -> String {
        let fallback = String(
            name.unicodeScalars.map { scalar -> Character in
                scalar.isASCII && scalar.value >= 0x20 && scalar != "\"" && scalar != "\\" && scalar.value != 0x7F
                    ? Character(scalar) : "_"
            })
        return "attachment; filename=\"\(fallback)\"; filename*=UTF-8''" + PercentEncoding.encode(name)
    }

    /// The origin's type when it is one a browser only shows or plays, never one it runs in this origin (HTML,
    /// SVG, scripts, XML): anything else is served as bytes.
    static func contentType(_ origin: String?) -> String {
        guard let origin else { return "application/octet-stream" }
        let type = origin.split(separator: ";").first.map { $0.trimmingSpaces().lowercased() } ?? ""
        let parts = type.split(separator: "/")
        guard parts.count == 2, parts.allSatisfy({ HTTPField.isToken(String($0)) }) else {
            return "application/octet-stream"
        }
        let shown = ["image", "audio", "video"].contains(String(parts[0])) && !type.contains("svg")
        let archives: Set<String> = [
            "application/pdf", "application/zip", "application/gzip", "application/x-tar",
            "application/x-xz", "application/zstd", "application/x-7z-compressed",
            "application/vnd.debian.binary-package", "application/x-iso9660-image",
        ]
        return shown || archives.contains(type) ? type : "application/octet-stream"
    }

    /// A strong tag of this version of the file: which file and when it last changed.
    static func etag(_ file: OpenFile) -> String {
        "\"\(String(file.identity.inode, radix: 16))-\(String(file.size, radix: 16))-"
            + "\(String(UInt64(max(0, file.modified * 1_000_000)), radix: 16))\""
    }
}

extension API {
    /// `GET /downloads/{id}/file`: the finished file, or an unfinished download's bytes as they land.
    func file(_ c: RequestContext) throws(Problem) -> APIResult {
        let id = c.parameters["id"]!
        if let flag = c.query["download"], flag != "0", flag != "1" {
            throw Problem.invalid([("download", "must be 1 (an attachment, the default) or 0 (shown where it can be)")])
        }
        let view = try attempt(c.operations.readView(id))
        // A seeding torrent's files are complete and named.
        guard view.download.state == .completed || view.download.state == .seeding else {
            return try unfinishedFile(c, view)
        }
        return .response(try finishedFile(c))
    }

    /// The headers of every answer with a file's bytes: its type and name, and that nothing in it runs here.
    func fileHeaders(_ c: RequestContext, _ download: Download) -> [(name: String, value: String)] {
        let inline = c.query["download"] == "0"
        return [
            ("Content-Type", FileResponse.contentType(download.contentType)),
            ("Content-Disposition", inline ? "inline" : FileResponse.disposition(download.filename ?? download.id)),
            // A file from anywhere is never a page of this origin: nothing in it runs, nothing is sniffed.
            ("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "default-src 'none'; sandbox"),
        ]
    }

    private func finishedFile(_ c: RequestContext) throws(Problem) -> HTTPResponse {
        let (file, download) = try attempt(c.operations.file(c.parameters["id"]!))
        let tag = FileResponse.etag(file)
        let modified = HTTPDate.format(Date(timeIntervalSince1970: file.modified.rounded(.down)))
        var headers =
            fileHeaders(c, download) + [
                ("ETag", tag), ("Last-Modified", modified), ("Accept-Ranges", "bytes"),
                ("Cache-Control", "private, no-cache"),
            ]
        if let header = c.request.header("If-None-Match"), ETag.matches(header, tag) {
            return HTTPResponse(status: 304, headers: [("ETag", tag), ("Last-Modified", modified)])
        }
        var range = FileResponse.range(c.request.header("Range"), size: file.size)
        // If-Range: the range only of the version the client has (its tag, or its date, compared exactly).
        if let condition = c.request.header("If-Range")?.trimmingSpaces(), range != .whole,
            condition != tag, condition != modified
        {
            range = .whole
        }
        switch range {
        case .whole:
            var response = HTTPResponse(status: 200, headers: headers)
            response.file = (file, 0, file.size)
            return response
        case .part(let first, let last):
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(file.size)"))
            var response = HTTPResponse(status: 206, headers: headers)
            response.file = (file, first, last - first + 1)
            return response
        case .unsatisfiable:
            throw FileResponse.unsatisfiable(size: file.size)
        }
    }
}
