import Foundation
import HaulCore
import HaulLoop
import XCTest
@testable import HaulAPI

/// The token stays out of URLs: a link or an EventSource opens with a ticket for its one path that expires within
/// a minute, and no answer tells the next site where the browser came from.
final class TicketTests: XCTestCase {
    private let token = "ticket-test-token-0123456789"
    private var bearer: [(String, String)] { [("Authorization", "Bearer \(token)")] }

    private func ticket(_ fixture: APIFixture, _ path: String) throws -> String {
        let reply = fixture.call("POST", "/tickets", json: "{\"path\":\"\(path)\"}", headers: bearer)
        XCTAssertEqual(reply.status, 201, String(decoding: reply.body, as: UTF8.self))
        let json = fixture.json(reply)
        XCTAssertEqual(json["url"] as? String, "\(path)?ticket=\(json["ticket"] as? String ?? "")")
        return try XCTUnwrap(json["ticket"] as? String)
    }

    func testATicketOpensItsOnePathAndNothingElse() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: token))
        let id = fixture.addPaused(headers: bearer)
        XCTAssertEqual(
            fixture.call("POST", "/tickets", json: #"{"path":"/events"}"#).status, 401,
            "a ticket needs the token")
        let events = try ticket(fixture, "/events")
        XCTAssertEqual(fixture.call("GET", "/events?ticket=\(events)").status, 200)
        XCTAssertEqual(fixture.call("GET", "/events?ticket=\(events)&last_event_id=0").status, 200)
        // Not another path, not a route that takes no ticket, not a ticket altered.
        XCTAssertEqual(fixture.call("GET", "/downloads/\(id)/events?ticket=\(events)").status, 401)
        XCTAssertEqual(fixture.call("GET", "/stats?ticket=\(events)").status, 401, "no ticket on /stats")
        XCTAssertEqual(fixture.call("GET", "/downloads?ticket=\(events)").status, 401)
        var altered = Array(events)
        altered[altered.count - 1] = altered.last == "0" ? "1" : "0"
        XCTAssertEqual(fixture.call("GET", "/events?ticket=\(String(altered))").status, 401)
        let stream = try ticket(fixture, "/downloads/\(id)/events")
        XCTAssertEqual(fixture.call("GET", "/downloads/\(id)/events?ticket=\(stream)").status, 200)
        let file = try ticket(fixture, "/downloads/\(id)/file")
        XCTAssertEqual(
            fixture.call("GET", "/downloads/\(id)/file?ticket=\(file)").status, 409,
            "let in: the download has no file yet")
        // Only stream and file paths get tickets.
        for path in ["/downloads", "/stats", "/settings", "/events?x=1", "/nowhere"] {
            let reply = fixture.call("POST", "/tickets", json: "{\"path\":\"\(path)\"}", headers: bearer)
            XCTAssertEqual(reply.status, 422, path)
        }
        // Wrong tickets are no guesses at the token: the address is never held back for them.
        for _ in 0..<20 { _ = fixture.call("GET", "/events?ticket=1.2.3") }
        XCTAssertEqual(fixture.call("GET", "/stats", headers: bearer).status, 200)
        XCTAssertEqual(fixture.call("GET", "/events?ticket=\(events)").status, 200)
    }

    func testATicketExpiresWithinAMinute() throws {
        let tickets = Tickets(token: token)
        let now = Date().timeIntervalSince1970
        let issued = tickets.issue(path: "/events", now: now)
        XCTAssertLessThanOrEqual(issued.expires - now, Tickets.lifetime + 1)
        XCTAssertEqual(tickets.admits(issued.ticket, path: "/events", now: now + 30), .server)
        XCTAssertNil(tickets.admits(issued.ticket, path: "/events", now: issued.expires + 1))
        XCTAssertNil(tickets.admits(issued.ticket, path: "/events/", now: now))
        // Another node with the same token accepts it; one with another token does not.
        XCTAssertEqual(Tickets(token: token).admits(issued.ticket, path: "/events", now: now), .server)
        XCTAssertNil(Tickets(token: token + "x").admits(issued.ticket, path: "/events", now: now))
        // An expiry far ahead cannot be signed by anyone else, nor passes if it somehow were.
        let parts = issued.ticket.split(separator: ".")
        XCTAssertNil(tickets.admits("\(Int64(now) + 86400).\(parts[1]).\(parts[2])", path: "/events", now: now))
        // A scoped token's ticket names it, signed: it cannot be passed off as the server's or another token's.
        let scoped = tickets.issue(path: "/events", now: now, for: .token("abc123"))
        XCTAssertEqual(tickets.admits(scoped.ticket, path: "/events", now: now), .token("abc123"))
        let pieces = scoped.ticket.split(separator: ".")
        XCTAssertNil(tickets.admits("\(pieces[0]).\(pieces[1]).\(pieces[3])", path: "/events", now: now))
        XCTAssertNil(tickets.admits("\(pieces[0]).\(pieces[1]).other.\(pieces[3])", path: "/events", now: now))
    }

    func testNoAnswerTellsWhereTheBrowserCameFrom() throws {
        let fixture = try APIFixture(access: AccessPolicy(token: token, corsOrigins: ["https://dash.example"]))
        let id = fixture.addPaused(headers: bearer)
        let answers = [
            fixture.call("GET", "/downloads/\(id)", headers: bearer),
            fixture.call("GET", "/stats"),
            fixture.call("GET", "/nowhere", headers: bearer),
            fixture.call("GET", "/events", headers: bearer),
            fixture.call("GET", "/downloads/\(id)/file", headers: bearer),
            fixture.call("GET", "/"),
            fixture.call("GET", "/healthz"),
            fixture.call(
                "OPTIONS", "/downloads",
                headers: [
                    ("Origin", "https://dash.example"),
                    ("Access-Control-Request-Method", "POST"),
                ]),
        ]
        for answer in answers {
            // Once: the event stream carried it twice.
            XCTAssertEqual(
                answer.headers.filter { $0.name == "Referrer-Policy" }.map(\.value), ["no-referrer"],
                "\(answer.status) \(answer.headers)")
        }
    }
}
