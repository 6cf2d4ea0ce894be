import HaulCore

extension Aria2RPC {
    /// One request to the front (a POST body, a GET, a WebSocket message), however many calls it holds: where it
    /// comes from, what its transport allows, and what it may still cost. Every call of a batch or a multicall
    /// draws on the same budget, so a small request cannot make the server build a huge answer (a 1 MiB POST of
    /// multicalls of `tellStopped(0, 1000)` made 170 MiB): past it, the calls left are answered with an error.
    final class Request {
        /// The client's address: wrong tokens are counted per address.
        let address: String
        /// Whether the transport lets it change anything (a GET without the server's token may only read).
        let mayChange: Bool
        /// Whether each call must prove a token, whatever the server's setting: a request a page of another site
        /// may have made (JSONP, a cross-site GET, `Origin: null`), which must get no data without one.
        let needsToken: Bool
        /// Whether a call of it proved a token (the server's or a scoped one).
        private(set) var provedToken = false
        private var calls = 0
        private var answerBytes = 0

        /// The most calls one request may make, batches and multicalls together ...
        static let maxCalls = 5000
        /// ... and the most bytes its answer may reach (results over it are refused, not built).
        static let maxAnswerBytes = 4 << 20

        init(address: String, mayChange: Bool, needsToken: Bool = false) {
            self.address = address
            self.mayChange = mayChange
            self.needsToken = needsToken
        }

        func proved() { provedToken = true }

        /// Counts one more call, refusing it past the budget.
        func startCall() throws(RPCError) {
            guard calls < Request.maxCalls, answerBytes <= Request.maxAnswerBytes else { throw Request.overBudget }
            calls += 1
        }

        /// Counts a call's result; a result that takes the answer past its budget is refused instead.
        func spend(_ result: JSONValue) throws(RPCError) -> JSONValue {
            answerBytes += result.serializedBytes().count
            guard answerBytes <= Request.maxAnswerBytes else { throw Request.overBudget }
            return result
        }

        static let overBudget = RPCError(
            "the request is over its budget (\(maxCalls) calls, "
                + "\(maxAnswerBytes >> 20) MiB of answer, batches and multicalls together): ask for less at a time")
    }
}
