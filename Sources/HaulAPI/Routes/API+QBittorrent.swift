import HaulCore
import HaulLoop

/// qBittorrent's Web API v2 under `/api/v2/`: a GET or POST of `/api/v2/AREA/NAME` with its parameters in the
/// query, a form or a multipart body, answered as qBittorrent 4.5 answers (plain text or JSON). The front checks
/// its own sessions (the `SID` cookie), so the route needs no bearer token.
extension API {
    var qbittorrentRoutes: [Route] {
        let run: (RequestContext) throws(Problem) -> APIResult = { [unowned self] c in
            .response(self.qbittorrent.answer(c.request, area: c.parameters["area"]!, name: c.parameters["name"]!))
        }
        return [
            Route(
                pattern: API.qbittorrentRoute, access: .open, checksOriginItself: true,
                handlers: [
                    // Any parameter: the front reads what each call takes, as qBittorrent does.
                    "GET": Route.Handler(operation: .qbittorrentRead, changesState: false, query: nil, run: run),
                    "POST": Route.Handler(operation: .qbittorrent, changesState: true, query: nil, run: run),
                ])
        ]
    }
}

extension API {
    /// How many parameters and files a qBittorrent call's body of `contentType` holds, or the status it is refused
    /// with. For the fuzzer, which feeds it anything.
    public static func decodeQBittorrentForm(_ body: [UInt8], contentType: String) -> (count: Int, status: Int) {
        let request = HTTPRequest(
            method: "POST", target: "/api/v2/torrents/add", headers: [("Content-Type", contentType)], body: body)
        do {
            let form = try QBitForm(request)
            return (form.fields.count + form.files.count, 200)
        } catch {
            return (0, error.status)
        }
    }
}
