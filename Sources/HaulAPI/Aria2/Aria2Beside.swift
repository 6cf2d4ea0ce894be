import HaulCore
import HaulLoop

/// aria2's `tellStatus` answered on the API's own loop (`API.readsBeside`), as REST's status reads are: when the
/// engine answers the call for the server's own token about a download at rest, it puts up every member of the
/// status under the GID asked (`StatusBoard`, taken down at the download's next change); a later call about it,
/// one call by POST with nothing the gate must see, is answered from that with the call's own id and keys.
enum Aria2Beside {
    /// What the engine put up: every member of the status as `Aria2Status.json` made them, written once (a call
    /// beside only copies bytes).
    struct Status: Sendable {
        /// Each member's name and its `"name":value` text, in aria2's order.
        let members: [(name: String, json: [UInt8])]
        /// The whole status (no keys asked).
        let whole: [UInt8]

        init(_ members: [(String, JSONValue)]) {
            self.members = members.map { name, value in
                var writer = JSONWriter(capacity: 64)
                writer.key(written: JSONWriter.key(bytes: name))
                writer.value(value)
                return (name, writer.bytes)
            }
            whole = JSONValue.object(members).serializedBytes()
        }

        /// The members `keys` asks for (all when none), as `Aria2Status.select` picks them.
        func selected(_ keys: [String]?) -> [UInt8] {
            guard let keys, !keys.isEmpty else { return whole }
            var out: [UInt8] = [UInt8(ascii: "{")]
            for member in members where keys.contains(member.name) {
                if out.count > 1 { out.append(UInt8(ascii: ",")) }
                out += member.json
            }
            out.append(UInt8(ascii: "}"))
            return out
        }
    }

    /// A call the API's own loop may answer: its id (echoed), the token it presented, the GID and the keys asked.
    struct Call {
        let id: JSONValue
        let token: String?
        let gid: String
        let keys: [String]?
    }

    /// A larger body (no status call is near it) is left to the engine.
    static let largestBody = 4096

    /// The board's key for the status of `gid`.
    static func key(_ gid: String) -> String { "aria2.tellStatus:" + gid }

    /// The `tellStatus` call `body` is, or nil for the engine to answer: a batch, another method, a GID or keys it
    /// would refuse.
    static func statusCall(_ body: [UInt8]) -> Call? {
        guard body.count <= largestBody, let request = try? JSONValue.parse(body), case .object = request,
            case .success(let call) = Aria2Envelope.call(request), call.method == "aria2.tellStatus"
        else { return nil }
        var params = call.params[...]
        var token: String?
        if let first = params.first?.stringValue, first.hasPrefix("token:") {
            token = String(first.dropFirst(6))
            params = params.dropFirst()
        }
        guard let gid = params.first?.stringValue, Aria2GIDs.isGID(gid) else { return nil }
        var keys: [String]?
        switch params.dropFirst().first {
        case nil, .null?: keys = nil
        case .array(let items)?: keys = items.compactMap(\.stringValue)
        default: return nil
        }
        return Call(id: call.id, token: token, gid: gid.lowercased(), keys: keys)
    }

    /// The answer to `call` from what the engine put up: the bytes `Aria2Envelope.result` would have made.
    static func answer(_ call: Call, from published: Status) -> HTTPResponse {
        let result = published.selected(call.keys)
        var writer = JSONWriter(capacity: result.count + 64)
        writer.object { answer in
            answer.key("id")
            answer.value(call.id)
            answer.member("jsonrpc", "2.0")
            answer.key("result")
            answer.raw(result)
        }
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json-rpc")], body: writer.bytes)
    }
}
