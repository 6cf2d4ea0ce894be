import HaulCore

extension Aria2RPC {
    /// An error as aria2 answers it: `{"code": 1, "message": "..."}`.
    struct RPCError: Error, Equatable {
        let code: Int
        let message: String

        init(_ message: String, code: Int = 1) {
            self.code = code
            self.message = message
        }

        static let unauthorized = RPCError("Unauthorized")
        static let parseError = RPCError("Parse error.", code: -32700)
        static let invalidRequest = RPCError("Invalid Request.", code: -32600)
        static let invalidParams = RPCError("Invalid params.", code: -32602)

        var json: JSONValue { .object([("code", .number(Double(code))), ("message", .string(message))]) }
    }
}

/// JSON-RPC 2.0 as aria2 speaks it, knowing no method: a request is one call or a batch of at most `maxBatch`; a
/// call names its method, its positional params and an id its answer echoes (any JSON); an answer carries a
/// `result` or an `error`. What is not JSON, not a call, or a batch too long is answered here with aria2's codes
/// (-32700, -32600, -32602); every well-formed call is answered by whoever knows the methods.
enum Aria2Envelope {
    typealias RPCError = Aria2RPC.RPCError

    /// One call: its id (echoed), method and positional params.
    struct Call: Equatable {
        var id: JSONValue
        var method: String
        var params: [JSONValue]
    }

    /// The most calls one batch (or multicall) may hold.
    static let maxBatch = 1000

    /// The answer to a request body: one response, or an array for a batch.
    static func answer(_ body: [UInt8], _ answerCall: (Call) -> Result<JSONValue, RPCError>) -> JSONValue {
        guard let request = try? JSONValue.parse(body) else { return error(.null, .parseError) }
        return answer(request, answerCall)
    }

    /// The answer to a request already parsed (a GET's members make one).
    static func answer(_ request: JSONValue, _ answerCall: (Call) -> Result<JSONValue, RPCError>) -> JSONValue {
        guard case .array(let calls) = request else { return answerOne(request, answerCall) }
        guard calls.count <= maxBatch else {
            return error(.null, RPCError("a batch holds at most \(maxBatch) calls", code: -32600))
        }
        return .array(calls.map { answerOne($0, answerCall) })
    }

    private static func answerOne(
        _ request: JSONValue, _ answerCall: (Call) -> Result<JSONValue, RPCError>
    )
        -> JSONValue
    {
        let id = request["id"] ?? .null
        switch call(request) {
        case .failure(let refusal): return error(id, refusal)
        case .success(let call):
            switch answerCall(call) {
            case .success(let value): return result(id, value)
            case .failure(let failure): return error(id, failure)
            }
        }
    }

    /// The call a request is, or why it is none.
    static func call(_ request: JSONValue) -> Result<Call, RPCError> {
        guard case .object = request, let method = request["method"]?.stringValue else {
            return .failure(.invalidRequest)
        }
        switch request["params"] {
        case .array(let items)?: return .success(Call(id: request["id"] ?? .null, method: method, params: items))
        case nil, .null?: return .success(Call(id: request["id"] ?? .null, method: method, params: []))
        default: return .failure(.invalidParams)
        }
    }

    static func result(_ id: JSONValue, _ result: JSONValue) -> JSONValue {
        .object([("id", id), ("jsonrpc", .string("2.0")), ("result", result)])
    }

    static func error(_ id: JSONValue, _ error: RPCError) -> JSONValue {
        .object([("id", id), ("jsonrpc", .string("2.0")), ("error", error.json)])
    }
}
