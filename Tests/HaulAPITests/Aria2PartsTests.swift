import Foundation
@testable import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The aria2 front's parts on their own: the JSON-RPC envelope and the notifier are values (requests in, answers
/// and notifications out), tested as the WebSocket decoder is; shutdown and the version are operations of their own.
final class Aria2PartsTests: XCTestCase {
    private typealias RPCError = Aria2RPC.RPCError

    private func answer(_ body: String) -> JSONValue {
        Aria2Envelope.answer(Array(body.utf8)) { call in
            call.method == "echo" ? .success(.array(call.params)) : .failure(RPCError("No such method: \(call.method)"))
        }
    }

    func testTheEnvelopeAnswersCallsAndBatchesAndRefusesWhatIsNoCall() throws {
        XCTAssertEqual(
            answer(#"{"jsonrpc":"2.0","id":"a","method":"echo","params":[1,"x"]}"#).serialized(),
            #"{"id":"a","jsonrpc":"2.0","result":[1,"x"]}"#)
        XCTAssertEqual(answer(#"{"id":7,"method":"echo"}"#)["result"], .array([]), "params may be left out")
        XCTAssertEqual(answer(#"{"id":7,"method":"nope"}"#)["error"]?["message"]?.stringValue, "No such method: nope")
        XCTAssertEqual(answer("not json")["error"]?["code"]?.integerValue, -32700)
        XCTAssertEqual(answer(#"{"id":3,"params":[]}"#)["error"]?["code"]?.integerValue, -32600, "no method")
        XCTAssertEqual(answer(#"{"id":3,"params":[]}"#)["id"], .number(3), "the id is echoed even so")
        XCTAssertEqual(answer(#"{"id":4,"method":"echo","params":{"a":1}}"#)["error"]?["code"]?.integerValue, -32602)
        guard case .array(let batch) = answer(#"[{"id":1,"method":"echo","params":[2]}, 3]"#) else {
            return XCTFail("a batch's answer is an array")
        }
        XCTAssertEqual(batch.map { $0["id"] }, [.number(1), .null])
        XCTAssertEqual(batch[1]["error"]?["code"]?.integerValue, -32600)
        let tooMany =
            "["
            + Array(repeating: #"{"method":"echo"}"#, count: Aria2Envelope.maxBatch + 1)
            .joined(separator: ",") + "]"
        XCTAssertEqual(answer(tooMany)["error"]?["code"]?.integerValue, -32600)
    }

    private func download(_ id: String, _ state: DownloadState, owner: String? = nil) -> Download {
        var download = Download(
            id: id, sequence: 1, url: "http://o/x", headers: [], requestedFilename: nil,
            directory: "", state: state, connections: 1, priority: 0, maxSpeed: nil,
            createdAt: Date())
        download.owner = owner
        return download
    }

    func testTheNotifierTellsEachStatusOnceAndAStopOnlyOfWhatHadNotFinished() throws {
        var notifier = Aria2Notifier()
        let id = HaulID.random()
        let gid = Aria2GIDs.gid(of: id)
        func changed(_ state: DownloadState) -> [String] {
            notifier.changed(.updated(id, stateChanged: true), download: download(id, state, owner: "t1")).map(\.method)
        }
        XCTAssertEqual(notifier.changed(.created(id), download: nil), [])
        XCTAssertEqual(changed(.probing), ["aria2.onDownloadStart"])
        XCTAssertEqual(changed(.downloading), [], "one start however many active states")
        XCTAssertEqual(notifier.changed(.updated(id, stateChanged: false), download: download(id, .downloading)), [])
        XCTAssertEqual(changed(.paused), ["aria2.onDownloadPause"])
        XCTAssertEqual(changed(.queued), [], "waiting is not told")
        XCTAssertEqual(changed(.downloading), ["aria2.onDownloadStart"])
        let stop = notifier.changed(.removed(id, last: .downloading), download: nil)
        XCTAssertEqual(
            stop, [Aria2Notifier.Notification(method: "aria2.onDownloadStop", gid: gid, owner: "t1")],
            "a removal names the token that added it, which is gone by now")
        XCTAssertEqual(changed(.completed), ["aria2.onDownloadComplete"])
        XCTAssertEqual(
            notifier.changed(.removed(id, last: .completed), download: nil), [],
            "forgetting a result is no stop")
        XCTAssertEqual(changed(.failed), ["aria2.onDownloadError"])
        let message = try JSONValue.parse(stop[0].message)
        XCTAssertEqual(message["method"]?.stringValue, "aria2.onDownloadStop")
        guard case .array(let params)? = message["params"] else { return XCTFail("params are an array") }
        XCTAssertEqual(params.first?["gid"]?.stringValue, gid)
    }

    func testWhatACallCausesFollowsItsAnswer() {
        var notifier = Aria2Notifier()
        notifier.answerStarted()
        XCTAssertEqual(notifier.changed(.updated("a", stateChanged: true), download: download("a", .probing)), [])
        XCTAssertEqual(notifier.changed(.updated("b", stateChanged: true), download: download("b", .paused)), [])
        XCTAssertEqual(notifier.answerSent().map(\.method), ["aria2.onDownloadStart", "aria2.onDownloadPause"])
        XCTAssertEqual(notifier.answerSent(), [], "told once")
        XCTAssertEqual(
            notifier.changed(.updated("a", stateChanged: true), download: download("a", .paused))
                .map(\.method), ["aria2.onDownloadPause"], "between calls, at once")
        notifier.forget()
        XCTAssertEqual(
            notifier.changed(.updated("a", stateChanged: true), download: download("a", .paused))
                .map(\.method), ["aria2.onDownloadPause"], "with no socket open nothing told was kept")
    }

    func testShutdownIsTheAdminsAndOnlyWhereTheOperatorAllowsIt() throws {
        let admin = "the-admin-token-0123456789"
        let refusing = try APIFixture(access: AccessPolicy(token: admin))
        let auth = [("Authorization", "Bearer " + admin)]
        XCTAssertEqual(refusing.call("POST", "/shutdown", headers: auth).status, 409)
        let rpc = #"{"jsonrpc":"2.0","id":1,"method":"aria2.shutdown","params":["token:\#(admin)"]}"#
        XCTAssertNotNil(refusing.json(refusing.call("POST", "/jsonrpc", json: rpc))["error"])

        let allowing = try APIFixture(access: AccessPolicy(token: admin), aria2: Aria2Config(allowShutdown: true))
        var stops = 0
        allowing.api.onShutdown = { stops += 1 }
        let reader = try XCTUnwrap(
            allowing.json(
                allowing.call(
                    "POST", "/tokens", json: #"{"name":"r","scope":"read"}"#,
                    headers: auth))["secret"] as? String)
        let refused = allowing.call("POST", "/shutdown", headers: [("Authorization", "Bearer " + reader)])
        XCTAssertEqual(refused.status, 403, "a read token may not stop the server")
        let readerRPC = #"{"jsonrpc":"2.0","id":1,"method":"aria2.shutdown","params":["token:\#(reader)"]}"#
        let readerAnswer = allowing.json(allowing.call("POST", "/jsonrpc", json: readerRPC))
        XCTAssertTrue(((readerAnswer["error"] as? [String: Any])?["message"] as? String ?? "").contains("needs admin"))
        XCTAssertEqual(stops, 0)
        XCTAssertEqual(allowing.call("POST", "/shutdown", headers: auth).status, 202)
        XCTAssertEqual(allowing.json(allowing.call("POST", "/jsonrpc", json: rpc))["result"] as? String, "OK")
        XCTAssertEqual(stops, 2)
        let version = allowing.json(allowing.call("GET", "/version", headers: [("Authorization", "Bearer " + reader)]))
        XCTAssertEqual(version["version"] as? String, HaulVersion.current)
        let getVersion = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:\#(reader)"]}"#
        let aria2 = allowing.json(allowing.call("POST", "/jsonrpc", json: getVersion))["result"] as? [String: Any]
        XCTAssertEqual(aria2?["version"] as? String, Aria2RPC.aria2Version, "a read token may ask the version")
    }
}
