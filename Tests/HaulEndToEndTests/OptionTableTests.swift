import Foundation
import HaulCore
import XCTest

/// The per-download option table (`DownloadOptions` in HaulCore) is what the API, the store and the CLI read:
/// each row must be in openapi.yaml as it declares (type, range, PATCH, shown back), in `haul add --help` under its
/// flag, and a column of the store.
final class OptionTableTests: XCTestCase {
    private var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The properties of a schema of openapi.yaml's components: name -> its one-line text (or the lines under it).
    private func properties(_ schema: String) throws -> [String: String] {
        let yaml = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let lines = yaml.components(separatedBy: "\n")
        guard let start = lines.firstIndex(of: "    \(schema):") else { return [:] }
        var found: [String: String] = [:]
        var current: String?
        var inProperties = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("    "), !line.hasPrefix("     ") { break }
            if line == "      properties:" { inProperties = true; continue }
            if line.hasPrefix("      "), !line.hasPrefix("       ") { inProperties = false }
            guard inProperties else { continue }
            if line.hasPrefix("        "), !line.hasPrefix("         "), let colon = line.firstIndex(of: ":") {
                current = line.trimmingCharacters(in: .whitespaces).components(separatedBy: ":")[0]
                found[current!] = String(line[line.index(after: colon)...])
            } else if let name = current {
                found[name, default: ""] += "\n" + line
            }
        }
        return found
    }

    func testEveryOptionIsWhereItsRowSays() throws {
        let rows = DownloadOptions.all
        XCTAssertGreaterThanOrEqual(rows.count, 10)
        let request = try properties("NewDownload")
        let patch = try properties("DownloadPatch")
        let resource = try properties("Download")
        let help = try execute(buildDirectory + "/haul", ["add", "--help"]).stdout
        // A row names its column, and holds it (or the download's own columns do: `start_paused` is the state).
        let store = try [
            "Store/DownloadColumn.swift", "Options/DownloadOptions.swift", "Options/DownloadOptions+Kinds.swift",
        ].map {
            try String(contentsOf: root.appendingPathComponent("Sources/HaulCore/" + $0), encoding: .utf8)
        }.joined()
        for row in rows {
            let spec = try XCTUnwrap(request[row.name], "\(row.name) is not in openapi.yaml's NewDownload")
            let type: String
            switch row.kind {
            case .integer, .bytes: type = "integer"
            case .decimal: type = "number"
            case .boolean: type = "boolean"
            case .text: type = "string"
            case .headers: type = "object"
            }
            XCTAssertTrue(
                spec.contains("type: \(type)") || (row.name == "category" && spec.contains("CategoryName")),
                "\(row.name): \(spec)")
            if let range = row.range {
                XCTAssertTrue(
                    spec.contains("minimum: \(range.lowerBound)")
                        && spec.contains("maximum: \(range.upperBound)"), "\(row.name)'s range against \(spec)")
            }
            XCTAssertEqual(patch[row.name] != nil, row.patchable, "\(row.name) in DownloadPatch")
            XCTAssertEqual(resource[row.name] != nil, row.shown, "\(row.name) in the Download resource")
            XCTAssertTrue(store.contains("DownloadColumn(name: \"\(row.column)\""), "\(row.name)'s column")
            if let flag = row.flag {
                XCTAssertTrue(
                    help.contains("--\(flag.name)" + (flag.placeholder.map { " " + $0 } ?? "")),
                    "haul add --help lacks --\(flag.name)")
                XCTAssertTrue(help.contains(String(flag.help.prefix(30))), "haul add --help lacks \(flag.name)'s help")
            }
        }
        // The only other members a request takes are its sources (a .torrent file among them), and PATCH's others are
        // the state and the place.
        XCTAssertEqual(Set(request.keys).subtracting(rows.map(\.name)), ["url", "urls", "mirrors", "torrent"])
        XCTAssertEqual(Set(patch.keys).subtracting(rows.filter(\.patchable).map(\.name)), ["state", "queue_position"])
    }
}
