import Foundation
import HaulAPI
import HaulCore
import HaulLoop

// The parsers that read what strangers send: origins (header lines, Content-Disposition, Content-Range,
// Retry-After-like dates, file names) and API clients (JSON bodies of POST /downloads, request targets, network
// lists, Host headers, header fields for origins) and operators (config files, switch values), aria2 clients (addUri's options) and qBittorrent clients (form and multipart bodies). The first byte of an input picks the parser; the rest is its input.
//
// Built with `make fuzz` (`swift build --sanitize=fuzzer -Xswiftc -DFUZZING`), this is a libFuzzer target. Built
// normally it replays the files given as arguments, so the corpus in Tests/Fuzz/corpus stays a regression test.

func exercise(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let input = Array(data.dropFirst())
    let text = String(decoding: input, as: UTF8.self)
    switch selector % 12 {
    case 0:
        var parser = HeaderParser()
        for line in input.split(separator: 0x0A, omittingEmptySubsequences: false) {
            let bytes = Array(line) + [0x0A]
            if bytes.withUnsafeBytes({ parser.feed($0) }) {
                let response = TransferResponse(
                    status: parser.status, headers: parser.headers,
                    effectiveURL: "http://origin.test/files/a%20b.iso")
                _ = Probe.interpretFirstResponse(response)
            }
        }
    case 1:
        if let name = ContentDisposition.filename(from: text) {
            let safe = FileName.sanitize(name)
            precondition(
                safe.map { !$0.contains("/") && !$0.hasPrefix(".") && !$0.isEmpty } ?? true,
                "sanitize let through '\(safe ?? "")'")
        }
        let derived = FileName.derive(contentDisposition: text, finalURL: "http://h/" + text)
        precondition(!derived.contains("/") && !derived.isEmpty && derived != "." && derived != "..")
    case 2:
        if let range = ContentRange(text), let first = range.first, let last = range.last {
            precondition(first <= last, "a Content-Range with first > last was accepted: \(text)")
        }
    case 3:
        let request = HTTPRequest(
            method: "POST", target: "/downloads",
            headers: [("Content-Type", "application/json")], body: input)
        // The same bytes as a qBittorrent call's body: a multipart one (boundary `x`) and a form.
        let multipart = API.decodeQBittorrentForm(input, contentType: "multipart/form-data; boundary=x")
        precondition([200, 400].contains(multipart.status) && multipart.count <= 1000, "\(multipart)")
        let form = API.decodeQBittorrentForm(input, contentType: "application/x-www-form-urlencoded")
        precondition(form.status == 200 && form.count <= input.count + 1, "\(form)")
        let (download, status) = API.decodeNewDownload(request)
        precondition([201, 400, 413, 415, 422].contains(status), "status \(status)")
        // The same bytes as the elements of a batch: each is checked as a download on its own.
        let batch = HTTPRequest(
            method: "POST", target: "/downloads", headers: [("Content-Type", "application/json")],
            body: Array("{\"downloads\":[".utf8) + input + Array("]}".utf8))
        let (elements, batchStatus) = API.decodeBatch(batch)
        precondition([200, 201, 400, 413, 422].contains(batchStatus), "batch status \(batchStatus)")
        precondition(elements.count <= 1000)
        for element in elements.compactMap({ $0 }) {
            precondition(!element.url.isEmpty && !(element.filename ?? "").contains("/"))
        }
        if let download {
            precondition(!download.url.isEmpty)
            precondition(!(download.filename ?? "").contains("/"))
            precondition(!download.directory.split(separator: "/").contains(".."))
            // What a client may hand an origin is a valid field line, so it cannot end the request early.
            precondition(download.headers.count <= 64)
            for header in download.headers {
                precondition(HTTPField.line(name: header.name, value: header.value) != nil, "\(header)")
            }
        }
    case 4:
        _ = try? JSONValue.parse(input).serializedBytes()
    case 5:
        let request = HTTPRequest(method: "GET", target: text)
        _ = request.path
        _ = request.query
    case 6:
        _ = AddressPolicy.network(text)
        if input.count == 4 || input.count == 16 { _ = AddressPolicy().allows(input) }
    case 7:
        // aria2.addUri's options as Haul's: never a folder outside the root, whatever `dir` says.
        if let download = API.decodeAria2AddURI(input, root: "/srv/haul") {
            precondition(!download.url.isEmpty)
            precondition(!download.directory.hasPrefix("/"), "absolute directory \(download.directory)")
            precondition(!download.directory.split(separator: "/").contains(".."), download.directory)
            precondition(!(download.filename ?? "").contains("/"))
            precondition((download.connections ?? 1) >= 1 && (download.connections ?? 1) <= 32)
        }
    case 8:
        // A Host header passes only as a name or address with a port; what it yields has no separator that could
        // let `127.0.0.1:80@evil.example` pass for loopback.
        if let host = HostHeader(text) {
            precondition(!host.name.contains("@") && !host.name.contains(",") && !host.name.contains(" "))
            precondition(host.port.map { (0...65535).contains($0) } ?? true)
        }
        if let line = HTTPField.line(name: text, value: text) {
            precondition(!line.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }), "line \(line)")
        }
        if HTTPField.isValue(text) { precondition(!text.utf8.contains(where: { $0 < 0x20 && $0 != 0x09 })) }
        // Any Content-Type: JSON is read only under application/json, whatever else it says.
        let typed = HTTPRequest(
            method: "POST", target: "/downloads", headers: [("Content-Type", text)],
            body: Array("{\"url\":\"http://h/x\"}".utf8))
        let status = API.decodeNewDownload(typed).status
        precondition(status == 415 || status == 201, "status \(status) for Content-Type \(text)")
        if status == 201 { precondition(text.lowercased().contains("application/json")) }
    case 9, 10:
        // A config file, TOML or JSON: each option once, whatever its spelling; never a crash on what it holds.
        let entries = (try? ConfigText.entries(input, path: selector % 12 == 9 ? "f.toml" : "f.json")) ?? []
        let names = entries.map { $0.name.replacing("_", with: "-") }
        precondition(Set(names).count == names.count, "an option given twice was accepted: \(names)")
    case 11:
        // A switch is on or off only by its documented words.
        if let value = Switch.parse(text) {
            precondition((value ? Switch.onWords : Switch.offWords).contains(text.lowercased()), "'\(text)'")
        }
    default:
        _ = Checksum(text)
        _ = FileName.sanitize(text)
    }
}

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOne(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
        exercise(start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
        return 0
    }
#else
    @main
    struct Replay {
        static func main() throws {
            var count = 0
            for argument in CommandLine.arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
                let paths =
                    isDirectory.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: argument).sorted().map { argument + "/" + $0 }
                    : [argument]
                for path in paths {
                    exercise(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
                    count += 1
                }
            }
            print("replayed \(count) inputs")
        }
    }
#endif
